"""What a method is (:class:`Method`), what its runner returns (:class:`RunOutput`), and the errors
a method raises when it breaks down."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from ppl_bnn.backends import BACKENDS, get_driver, has_driver


class Family(StrEnum):
    """How a method produces its draws."""

    #: A fitted distribution (or point) from an optimisation: SVI, MAP, Laplace.
    OPTIMISATION = "optimisation"
    #: Draws of Markov chains (convergence diagnostics and ESS apply): NUTS, HMC, SG-MCMC.
    MARKOV_CHAIN = "markov_chain"
    #: Independent fits combined as equally weighted draws: deep ensembles.
    ENSEMBLE = "ensemble"


@dataclass
class RunOutput:
    """Raw output of a runner, before ``fit`` adds the pointwise log-likelihood.

    Attributes:
        draws: Site -> array shaped (chain, draw, *site_shape), constrained space.
        sample_stats: Stat -> array shaped (chain, draw) (samplers only).
        timings: Seconds: ``compile``, ``warmup`` (MCMC warmup / SVI optimisation), ``sampling``.
        losses: SVI loss (negative ELBO estimate) per step.
        variational: SVI guide parameters (unconstrained): ``{"loc": {...}, "scale": {...}}``.
        info: Anything else worth recording (chain method, Pyro jit mode, threads, divergence).
    """

    draws: dict[str, np.ndarray]
    timings: dict[str, float]
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    losses: np.ndarray | None = None
    variational: dict[str, dict[str, np.ndarray]] | None = None
    info: dict[str, Any] = field(default_factory=dict)


#: ``(name, target, options, seed) -> RunOutput``: what drivers and backend-neutral runners are.
Runner = Callable[..., RunOutput]


@dataclass(frozen=True, kw_only=True)
class Method:
    """One inference method: its options, its family, and how it runs on each backend.

    A method runs either through a *driver* that every backend folder may provide
    (``ppl_bnn/backends/<backend>/<driver>.py``, e.g. ``autoguide``), configured by the method's
    options class, or through a backend-neutral ``run`` (e.g. an ensemble of another method).

    Attributes:
        name: What ``fit(..., method=name)`` takes.
        summary: One line for listings.
        options: The frozen options dataclass (validated in ``__post_init__``).
        family: :class:`Family`.
        smoke: Options for a tiny, fast fit (the conformance tests run every method with them).
        driver: The backend driver that runs it, or None when ``run`` is given.
        run: A backend-neutral runner ``(name, target, options, seed)``.
        exact: A Markov chain with a Metropolis correction on the full-data posterior, exact
            in the limit of many draws (reports show its rank plots and weight summaries).
    """

    name: str
    summary: str
    options: type
    family: Family
    smoke: Mapping[str, Any]
    driver: str | None = None
    run: Runner | None = None
    exact: bool = False

    def __post_init__(self) -> None:
        if (self.driver is None) == (self.run is None):
            raise ValueError(f"method {self.name!r} needs exactly one of driver= and run=")

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends it runs on."""
        if self.driver is None:
            return BACKENDS
        return tuple(b for b in BACKENDS if has_driver(b, self.driver))

    def runner(self, backend: str) -> Runner:
        """``(name, target, options, seed) -> RunOutput`` on ``backend``."""
        if self.run is not None:
            return self.run
        return get_driver(backend, self.driver)


class DivergedError(RuntimeError):
    """A method produced non-finite values before it could return any usable draw."""


class HessianError(RuntimeError):
    """The Hessian of the negative log joint at the optimum is not positive definite."""
