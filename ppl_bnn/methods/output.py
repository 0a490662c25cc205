"""What a method's run returns: :class:`RunOutput`, the raw draws and what ran, before
``fit`` turns it into a :class:`~ppl_bnn.results.FitResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RunOutput:
    """Raw output of a method's run (its driver or run function), before ``fit`` adds the
    pointwise log-likelihood.

    Attributes:
        draws: Site -> array shaped (chain, draw, *site_shape), constrained space.
        sample_stats: Stat -> array shaped (chain, draw) (samplers only).
        timings: Seconds: ``compile``, ``warmup`` (MCMC warmup / SVI optimisation), ``sampling``.
        losses: SVI loss (negative ELBO estimate) per step.
        variational: SVI guide parameters (unconstrained): ``{"loc": {...}, "scale": {...}}``.
        info: Anything else worth recording (chain method, Pyro jit mode, threads, divergence).
        linearised_at: The mode a linearised (GLM) predictive expands the network around, site ->
            value (constrained space, one draw's shape); None: the predictive over draws.
    """

    draws: dict[str, np.ndarray]
    timings: dict[str, float]
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    losses: np.ndarray | None = None
    variational: dict[str, dict[str, np.ndarray]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    linearised_at: dict[str, np.ndarray] | None = None
