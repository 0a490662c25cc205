r"""``mams``: Metropolis-adjusted microcanonical sampling, BlackJAX's adjusted MCLMC and tuner.

MAMS moves the unconstrained parameters with the isokinetic dynamics of
:mod:`ppl_bnn.methods.mclmc` (a velocity of unit length, McLachlan's minimal-norm integrator, a
diagonal preconditioner :math:`M^{-1}`), but as the proposal of a Metropolis-Hastings step:
from a fresh velocity :math:`u \sim \mathrm{Unif}(S^{d-1})`, :math:`n` integrator steps of size
:math:`\epsilon` propose :math:`z'`, accepted with probability :math:`\min(1, e^{-\Delta E})`
for the energy error :math:`\Delta E` of the trajectory. So its draws have the posterior as
their stationary distribution exactly, as NUTS's do; MCLMC's draws carry a bias. The number of
steps per proposal is drawn uniformly with mean :math:`L / \epsilon`, against the resonances of
a fixed trajectory length.

BlackJAX's tuner (``adjusted_mclmc_find_L_and_step_size``) spends the ``num_warmup`` steps in
two dual-averaging phases (:data:`TUNING_FRACTIONS`) that set :math:`\epsilon` for an acceptance
rate of ``target_accept``, the second also estimating :math:`M^{-1}` from the chain's running
variances (``diagonal_preconditioning``); it keeps :math:`L / \epsilon` at
``num_integration_steps`` throughout (BlackJAX's advice: 2, "avg-preserving"), so the step
size is tuned for the trajectories it will run. A chain whose tuning or draws freeze is
retuned once from a ten times smaller start and dropped if it freezes again, as for ``mclmc``;
``init="ensemble"`` starts the chains at a deep ensemble's modes.

References: Robnik, Cohn-Gordon & Seljak, "Metropolis Adjusted Microcanonical Hamiltonian Monte
Carlo" (arXiv:2503.01707, 2025); Robnik, De Luca, Silverstein & Seljak, "Microcanonical
Hamiltonian Monte Carlo" (JMLR 2023). NumPyro only: BlackJAX runs on JAX.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.checks import (
    check_bool,
    check_choice,
    check_positive_float,
    check_positive_int,
)
from ppl_bnn.methods.mclmc import MIN_STEP_SIZE, MIN_WARMUP
from ppl_bnn.methods.starts import SAMPLER_INITS

#: Shares of ``num_warmup`` in the tuner's two dual-averaging phases: the step size, then the
#: step size with the preconditioner (no third phase: :math:`L` follows the step size).
TUNING_FRACTIONS: tuple[float, float, float] = (0.5, 0.5, 0.0)
#: BlackJAX clamps the mean steps per proposal, :math:`L / \epsilon`, above this.
MIN_INTEGRATION_STEPS = 1.1
#: The tuner's default start, :math:`0.2 \sqrt d` (BlackJAX's own). Its first phase holds
#: :math:`L` at ``num_integration_steps`` times the start, so the step size can grow at most
#: that much over it: a small start (MCLMC's 1e-3) leaves the chains unmoved through that
#: phase and the preconditioner's variances at zero.
START_STEP_PER_ROOT_DIM = 0.2


@dataclass(frozen=True, kw_only=True)
class MAMSOptions:
    """Options of ``fit(..., method="mams")``.

    Attributes:
        num_warmup: Tuning steps per chain (discarded; at least
            :data:`~ppl_bnn.methods.mclmc.MIN_WARMUP`).
        num_samples: Kept draws per chain.
        thinning: Metropolis steps per kept draw.
        num_chains: Independent chains, run vectorised in one program.
        target_accept: The acceptance rate the step size is tuned for, in (0, 1).
        num_integration_steps: Mean integrator steps per proposal, :math:`L / \\epsilon` (above
            :data:`MIN_INTEGRATION_STEPS`).
        step_size: Where the step-size tuner starts (None: :data:`START_STEP_PER_ROOT_DIM`
            times the square root of the number of weights).
        diagonal_preconditioning: Tune a diagonal preconditioner :math:`M^{-1}`.
        init: ``"uniform"`` (U(-2, 2) on the unconstrained scale) or ``"ensemble"`` (a deep
            ensemble's modes).
    """

    num_warmup: int = 2000
    num_samples: int = 1000
    thinning: int = 4
    num_chains: int = 4
    target_accept: float = 0.9
    num_integration_steps: float = 2.0
    step_size: float | None = None
    diagonal_preconditioning: bool = True
    init: str = "uniform"

    @property
    def kept_draws(self) -> int:
        """Draws the result holds (:mod:`ppl_bnn.methods.memory`)."""
        return self.num_chains * self.num_samples

    def matrix_floats(self, num_weights: int) -> int:
        """Floats of the largest array the fit holds beyond its draws: the positions of the
        tuner's phases, per chain."""
        return self.num_chains * self.num_warmup * num_weights

    def __post_init__(self) -> None:
        check_positive_int("num_warmup", self.num_warmup, minimum=MIN_WARMUP)
        check_positive_int("num_samples", self.num_samples)
        check_positive_int("thinning", self.thinning)
        check_positive_int("num_chains", self.num_chains)
        check_positive_float("target_accept", self.target_accept)
        if not self.target_accept < 1:
            raise ValueError(f"target_accept must be in (0, 1), got {self.target_accept!r}")
        check_positive_float("num_integration_steps", self.num_integration_steps)
        if self.num_integration_steps <= MIN_INTEGRATION_STEPS:
            raise ValueError(
                f"num_integration_steps must be above {MIN_INTEGRATION_STEPS} (BlackJAX's "
                f"tuner drives the step size to zero below it), got {self.num_integration_steps!r}"
            )
        if self.step_size is not None:
            check_positive_float("step_size", self.step_size)
        if self.step_size is not None and self.step_size < MIN_STEP_SIZE:
            raise ValueError(
                f"step_size must be at least {MIN_STEP_SIZE:g}, got {self.step_size!r}"
            )
        check_bool("diagonal_preconditioning", self.diagonal_preconditioning)
        check_choice("init", self.init, SAMPLER_INITS)


METHOD = Method(
    name="mams",
    summary="Metropolis-adjusted microcanonical sampler (BlackJAX's adjusted MCLMC)",
    options=MAMSOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_warmup": 20, "num_samples": 5, "thinning": 2, "num_chains": 2},
    driver="mams",
    exact=True,  # a Metropolis test on the full-data posterior
    unavailable="BlackJAX's adjusted MCLMC runs on JAX only",
)
