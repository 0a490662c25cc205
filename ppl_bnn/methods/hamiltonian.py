r"""What ``nuts`` (No-U-Turn, Hoffman & Gelman 2014) and ``hmc`` (Neal 2011) share.

Both run on the potential :math:`U(z) = -\log p(y, T(z)) - \log|\det J_T(z)|` of the
unconstrained parameters, with leapfrog steps

.. math:: r \leftarrow r - \tfrac{\epsilon}{2}\nabla U(z),\quad
          z \leftarrow z + \epsilon M^{-1} r,\quad
          r \leftarrow r - \tfrac{\epsilon}{2}\nabla U(z),

step size :math:`\epsilon` adapted by dual averaging to ``target_accept`` and a diagonal (or dense)
mass matrix :math:`M` adapted during warmup. NumPyro runs its own ``MCMC``. Pyro runs its ``MCMC``
on a potential built once before sampling, so building it (tracing, compiling) is timed apart from
warmup and sampling and every gradient evaluation is counted: by default the Pyro model's
potential on one flat vector, its value and gradient compiled together
(:mod:`ppl_bnn.backends.pyro.potential`); ``potential="pyro"`` / ``"pyro_jit"`` use Pyro's own
per-site potential from ``initialize_model`` (eager, or with ``jit_compile``). The driver is
``hmc`` in each backend folder.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import DivergedError, backend_option
from ppl_bnn.methods.checks import (
    check_bool,
    check_choice,
    check_positive_float,
    check_positive_int,
    check_probability,
)
from ppl_bnn.methods.divergence import diverged
from ppl_bnn.methods.starts import SAMPLER_INITS

#: How NumPyro runs several chains (``auto``: in parallel where there are host devices enough).
CHAIN_METHODS: tuple[str, ...] = ("auto", "parallel", "sequential", "vectorized")


@dataclass(frozen=True, kw_only=True)
class MCMCOptions:
    """Options shared by ``nuts`` and ``hmc``.

    Attributes:
        num_warmup: Adaptation iterations per chain (discarded).
        num_samples: Kept draws per chain.
        num_chains: Independent chains. NumPyro runs them in parallel when JAX has that many host
            devices (see :func:`ppl_bnn.configure_runtime`), else sequentially; Pyro runs them one
            after another in this process.
        target_accept: Target acceptance probability of step-size adaptation.
        step_size: Initial leapfrog step size.
        dense_mass: Adapt a dense mass matrix instead of a diagonal one.
        potential: Pyro only: how the potential is evaluated. ``"compiled"`` (the fastest),
            ``"traced"`` or ``"eager"``: the Pyro model's log joint on one flat vector of
            unconstrained parameters, with value and gradient compiled by ``torch.compile``,
            ``torch.jit.trace``-d, or plain; ``"pyro_jit"`` / ``"pyro"``: Pyro's own per-site
            potential from ``initialize_model`` with / without ``jit_compile`` (Pyro's default
            path). NumPyro always compiles.
        init: NumPyro only: where the chains start: ``"uniform"`` (U(-2, 2) on the
            unconstrained scale, the library's default) or ``"ensemble"``, each chain at its
            own member of a deep ensemble (:mod:`ppl_bnn.methods.starts`; DEI-MCMC).
        chain_method: NumPyro only: ``"auto"`` (in parallel on host devices where there are
            enough, else one after another), ``"parallel"``, ``"sequential"`` or
            ``"vectorized"`` (every chain in one program, in lockstep: many chains on few
            cores).
    """

    num_warmup: int = 500
    num_samples: int = 500
    num_chains: int = 1
    target_accept: float = 0.8
    step_size: float = 1.0
    dense_mass: bool = False
    potential: str = backend_option("compiled")
    init: str = backend_option("uniform")
    chain_method: str = backend_option("auto")

    @property
    def kept_draws(self) -> int:
        """Draws the result holds (:mod:`ppl_bnn.methods.memory`)."""
        return self.num_chains * self.num_samples

    def matrix_floats(self, num_weights: int) -> int:
        """Floats of the largest matrix the fit holds beyond its draws: a dense mass matrix."""
        return num_weights * num_weights if self.dense_mass else 0

    def __post_init__(self) -> None:
        check_positive_int("num_warmup", self.num_warmup, minimum=0)
        check_positive_int("num_samples", self.num_samples)
        check_positive_int("num_chains", self.num_chains)
        check_probability("target_accept", self.target_accept)
        check_positive_float("step_size", self.step_size)
        check_bool("dense_mass", self.dense_mass)
        check_choice("init", self.init, SAMPLER_INITS)
        check_choice("chain_method", self.chain_method, CHAIN_METHODS)


def no_finite_start(name: str, target: Target) -> DivergedError:
    """The error of a sampler that finds no starting point where the log density and its
    gradient are finite (every library tries about 100 random points), with the likely cause."""
    return diverged(
        name,
        "the log density or its gradient is not finite at any starting point tried "
        "(initialisation)",
        target.model,
    )


def tree_depth(num_steps: np.ndarray) -> np.ndarray:
    """NUTS tree depth from leapfrog steps per draw (the convention ArviZ uses)."""
    return (np.floor(np.log2(np.maximum(num_steps, 1))) + 1).astype(np.int64)
