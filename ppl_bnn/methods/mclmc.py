r"""``mclmc``: unadjusted Microcanonical Langevin Monte Carlo, BlackJAX's kernel and tuner.

MCLMC moves the unconstrained parameters :math:`z \in \mathbb{R}^d` with a velocity :math:`u`
of unit length (isokinetic dynamics) on the log density :math:`\log p(z)` (the log joint of
:math:`T(z)` plus :math:`\log|\det J_T(z)|`), preconditioned by a diagonal :math:`M^{-1}`,

.. math:: \dot z = M^{-1/2} u, \qquad
          \dot u = \frac{1}{d - 1} (I - u u^\top) M^{-1/2} \nabla \log p(z),

whose :math:`z`-marginal is the posterior. Each step integrates it over :math:`\epsilon`
(McLachlan's minimal-norm integrator) between two partial refreshments of the velocity,
:math:`u \leftarrow (u + \nu \xi) / |u + \nu \xi|` with :math:`\xi \sim \mathcal{N}(0, I)` and
:math:`\nu = \sqrt{(e^{\epsilon / L} - 1) / d}`, which decorrelate it over a length :math:`L`.
No Metropolis test follows: the draws carry a bias that the step size controls. BlackJAX's tuner
(``mclmc_find_L_and_step_size``) sets, per chain, in three phases of the ``num_warmup`` steps
(:data:`TUNING_FRACTIONS`): :math:`\epsilon` so that the energy error :math:`\Delta E` of a step
has :math:`\operatorname{Var}[\Delta E] / d` = ``desired_energy_var`` (for Gaussian targets this
bounds the squared relative bias of the second moments; it uses
:math:`\operatorname{Var}[\Delta E] \propto \epsilon^6`); :math:`M^{-1}` from the second
phase's running variances (``diagonal_preconditioning``); and :math:`L` as 0.4 times
:math:`\epsilon` times the positions' integrated autocorrelation time, in steps, in the third.
The chains then run ``num_samples * thinning`` steps with these values, keeping every
``thinning``-th position.

The tuner starts at ``step_size``, small: BlackJAX's own start, :math:`\sqrt d / 4`, drove
chains started at a mode to a step size of zero. A chain whose tuning ends so (or whose draws do
not move or are not finite) is retuned once from a start ten times smaller, and dropped if it
freezes again (see :mod:`ppl_bnn.backends.numpyro.mclmc`). With ``init="ensemble"`` the chains
start at the modes of a deep ensemble (:mod:`ppl_bnn.methods.starts`), as in MILE.

References: Robnik, De Luca, Silverstein & Seljak, "Microcanonical Hamiltonian Monte Carlo"
(2023; JMLR 2024); Robnik & Seljak, "Fluctuation without dissipation: Microcanonical Langevin
Monte Carlo" (2024); Robnik & Seljak, the energy error's bound on the bias for Gaussian targets
(arXiv:2412.08876, 2024); Sommer et al., "Microcanonical Langevin Ensembles: Advancing the
Sampling of Bayesian Neural Networks" (ICLR 2025, MILE: deep-ensemble starts, then MCLMC).
NumPyro only: BlackJAX runs on JAX.
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
from ppl_bnn.methods.starts import SAMPLER_INITS

#: Shares of ``num_warmup`` the tuner spends on the step size, on the step size and the
#: preconditioner (BlackJAX adds a third of this phase again to retune the step size after it),
#: and on :math:`L`; the split that tuned 64 MAP-started chains on bostonHousing (751 weights)
#: to step sizes of 0.7 to 1.4 (BlackJAX's default spends a tenth on each).
TUNING_FRACTIONS: tuple[float, float, float] = (0.5, 0.3, 0.2)
#: The fewest tuning steps: each phase then has at least two (the autocorrelation needs two).
MIN_WARMUP = 10
#: The smallest starting step size. The tuner averages :math:`\xi / \epsilon^6` in float32,
#: which overflows once :math:`\epsilon` falls to about 2e-8 (it then returns a step size of
#: exactly 0); the retune starts ten times lower than this, still clear of it.
MIN_STEP_SIZE = 1e-6


def tuning_steps(num_warmup: int) -> tuple[int, int, int]:
    """Steps of the tuner's three phases, as BlackJAX rounds them (before its retune)."""
    first, second, third = (round(num_warmup * f) for f in TUNING_FRACTIONS)
    return first, second, third


@dataclass(frozen=True, kw_only=True)
class MCLMCOptions:
    """Options of ``fit(..., method="mclmc")``.

    Attributes:
        num_warmup: Tuning steps per chain (discarded; at least :data:`MIN_WARMUP`). With
            ``diagonal_preconditioning`` BlackJAX adds a tenth of them to retune the step size
            after the preconditioner.
        num_samples: Kept draws per chain.
        thinning: Steps per kept draw (``num_samples * thinning`` sampling steps per chain).
        num_chains: Independent chains, run vectorised in one program.
        desired_energy_var: Target of :math:`\\operatorname{Var}[\\Delta E] / d`, the energy
            error variance per dimension; smaller means smaller steps and less bias.
        step_size: Where the step-size tuner starts (at least :data:`MIN_STEP_SIZE`).
        diagonal_preconditioning: Tune a diagonal preconditioner :math:`M^{-1}` (the
            posterior variances).
        init: Where the chains start: ``"uniform"`` (U(-2, 2) on the unconstrained scale, as
            NumPyro's ``init_to_uniform``) or ``"ensemble"`` (a deep ensemble's modes, MILE).
    """

    num_warmup: int = 2000
    num_samples: int = 1000
    thinning: int = 4
    num_chains: int = 4
    desired_energy_var: float = 5e-4
    step_size: float = 1e-3
    diagonal_preconditioning: bool = True
    init: str = "uniform"

    @property
    def kept_draws(self) -> int:
        """Draws the result holds (:mod:`ppl_bnn.methods.memory`)."""
        return self.num_chains * self.num_samples

    def matrix_floats(self, num_weights: int) -> int:
        """Floats of the largest array the fit holds beyond its draws: the positions of the
        tuner's last phase, which estimates the autocorrelation time from them, per chain."""
        return self.num_chains * tuning_steps(self.num_warmup)[2] * num_weights

    def __post_init__(self) -> None:
        check_positive_int("num_warmup", self.num_warmup, minimum=MIN_WARMUP)
        check_positive_int("num_samples", self.num_samples)
        check_positive_int("thinning", self.thinning)
        check_positive_int("num_chains", self.num_chains)
        check_positive_float("desired_energy_var", self.desired_energy_var)
        check_positive_float("step_size", self.step_size)
        if self.step_size < MIN_STEP_SIZE:
            raise ValueError(
                f"step_size must be at least {MIN_STEP_SIZE:g} (the tuner overflows float32 "
                f"below about 2e-8), got {self.step_size!r}"
            )
        check_bool("diagonal_preconditioning", self.diagonal_preconditioning)
        check_choice("init", self.init, SAMPLER_INITS)


METHOD = Method(
    name="mclmc",
    summary="unadjusted microcanonical Langevin MC (BlackJAX)",
    options=MCLMCOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_warmup": 20, "num_samples": 5, "thinning": 2, "num_chains": 2},
    driver="mclmc",
    exact=False,  # no Metropolis test: a bias that the step size controls
    unavailable="BlackJAX's MCLMC runs on JAX only",
)
