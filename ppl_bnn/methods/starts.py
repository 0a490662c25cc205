r"""Markov chains started from a deep ensemble's members (``init="ensemble"``).

A BNN posterior has many modes and a chain seldom leaves the one it starts in, so K chains from
K random points spend their warm-up finding modes, and R-hat across them never approaches 1.
Sommer et al. (ICML 2024, "Connecting the dots", DEI-MCMC) and MILE (Sommer et al., ICLR 2025)
start each chain instead at the mode of its own member of a deep ensemble: K MAP fits of the
same model on every training point, from different initial weights (on NumPyro, all K in one
program: :mod:`ppl_bnn.backends.numpyro.starts`). The chains then explore K modes, and their
pooled draws are a chain ensemble: the reference posterior of :mod:`ppl_bnn.reference`.

The noise is not started at the members' own values. A mode fits the training noise, so its
noise can sit far below the posterior's (on small sets), and a sampler tuned at a collapsed
noise takes minute steps. Each chain starts at the noise of the ensemble's predictive instead,
the member's noise variance plus the members' spread at the training inputs,

.. math:: \sigma_k^{2,\text{start}} = \sigma_k^2 + \frac1N \sum_n \operatorname{Var}_k f_k(x_n),

which the chains then adapt (a learned noise only; a known one is the model's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.model.spec import PRECISION_SITE
from ppl_bnn.predictive import forward_draws

#: What ``init`` may be for a sampler that takes it: the library's own start (uniform in
#: (-2, 2) on the unconstrained scale), or a deep ensemble's members.
SAMPLER_INITS: tuple[str, ...] = ("uniform", "ensemble")


def with_predictive_noise(
    target: Target, starts: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``starts`` (site -> constrained values (members, *site_shape)) with each member's noise
    precision set to the ensemble predictive's (see the module docstring), and the members' noise
    std before and after (``start_noise_map``, ``start_noise``); unchanged where the model's
    noise is known."""
    if PRECISION_SITE not in starts:
        return starts, {}
    f = forward_draws(target.backend, target.spec, starts, target.model.x)[..., 0]  # (K, N)
    noise_var = 1.0 / starts[PRECISION_SITE]
    spread = float(np.mean(np.var(f, axis=0)))
    starts = {**starts, PRECISION_SITE: (1.0 / (noise_var + spread)).astype(noise_var.dtype)}
    info = {
        "start_noise_map": np.sqrt(noise_var).round(6).tolist(),
        "start_noise": np.sqrt(noise_var + spread).round(6).tolist(),
    }
    return starts, info
