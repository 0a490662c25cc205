r"""Markov chains started from a deep ensemble's members (``init="ensemble"``).

A BNN posterior has many modes and a chain seldom leaves the one it starts in, so K chains from
K random points spend their warm-up finding modes, and R-hat across them never approaches 1.
Sommer et al. (ICML 2024, "Connecting the dots", DEI-MCMC) and MILE (Sommer et al., ICLR 2025)
start each chain instead at the mode of its own member of a deep ensemble: K MAP fits of the
same model from different initial weights (:func:`~ppl_bnn.methods.ensemble.ensemble_of` with
``map``'s defaults, child seeds of the fit's). The chains then explore K modes, and their pooled
draws are a chain ensemble: the reference posterior of :mod:`ppl_bnn.reference`.

The noise is not started at the members' own values. A mode fits the training noise, so its
noise can sit far below the posterior's (on small sets, where ``map`` keeps the mode rather
than stopping early), and a sampler tuned at a collapsed noise takes minute steps. Each chain
starts at the noise of the ensemble's predictive instead, the member's noise variance plus the
members' spread at the training inputs,

.. math:: \sigma_k^{2,\text{start}} = \sigma_k^2 + \frac1N \sum_n \operatorname{Var}_k f_k(x_n),

which the chains then adapt (a learned noise only; a known one is the model's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.ensemble import ensemble_of
from ppl_bnn.model.spec import PRECISION_SITE
from ppl_bnn.predictive import forward_draws
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now

#: What ``init`` may be for a sampler that takes it: the library's own start (uniform in
#: (-2, 2) on the unconstrained scale), or a deep ensemble's members.
SAMPLER_INITS: tuple[str, ...] = ("uniform", "ensemble")


def ensemble_starts(
    name: str, target: Target, num_chains: int, seed: int
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The start of each of ``num_chains`` chains: site -> constrained values
    (chains, *site_shape), from the modes of as many ``map`` fits (see the module docstring),
    and what they cost and were (``info``: ``start_seconds``, the members' ``start_noise_map``
    and ``start_noise``). A member that diverged is left out, so there may be fewer starts."""
    began = now()
    members = ensemble_of(
        map_estimate.METHOD, map_estimate.MAPOptions(), num_chains, f"{name}_start", target,
        child_seed(seed, "ensemble_starts"),
    )  # fmt: skip
    starts = {site: np.asarray(values[0]) for site, values in members.draws.items()}
    info: dict[str, Any] = {"num_starts": len(next(iter(starts.values())))}
    if PRECISION_SITE in starts:
        spec = target.spec
        f = forward_draws(target.backend, spec, starts, target.model.x)[..., 0]  # (K, N)
        noise_var = 1.0 / starts[PRECISION_SITE]
        spread = float(np.mean(np.var(f, axis=0)))
        starts[PRECISION_SITE] = (1.0 / (noise_var + spread)).astype(noise_var.dtype)
        info["start_noise_map"] = np.sqrt(noise_var).round(6).tolist()
        info["start_noise"] = np.sqrt(noise_var + spread).round(6).tolist()
    info["start_seconds"] = now() - began
    return starts, info
