r"""Stochastic-gradient Hamiltonian Monte Carlo (``sghmc``; Chen, Fox & Guestrin 2014).

The "SGD with momentum" form of SGHMC (Chen et al. 2014, eq. 15, with :math:`\hat\beta = 0`): on
the unconstrained parameters :math:`z`, with the minibatch log density :math:`\log \tilde p`, step
sizes :math:`\epsilon_t` and temperature :math:`\tau` of :mod:`ppl_bnn.methods.sgmcmc`, friction
:math:`\alpha \in (0, 1]` and momentum :math:`v`, each step moves

.. math::

    v_{t+1} &= (1 - \alpha)\, v_t + \frac{\epsilon_t}{2} \nabla_z \log \tilde p(z_t)
        + \sqrt{\alpha \epsilon_t \tau}\, \xi_t, \qquad \xi_t \sim \mathcal N(0, I), \\
    z_{t+1} &= z_t + v_{t+1}.

This is Chen et al.'s update with learning rate :math:`\eta = \epsilon / 2` and momentum decay
:math:`1 - \alpha`, its noise :math:`\mathcal N(0, 2 \alpha \eta)` multiplied by :math:`\tau`
(BlackJAX's ``sghmc`` diffusion uses the same momentum update with step size :math:`\eta`). The
momentum is updated first and moves the position in the same step (a semi-implicit Euler step,
Chen et al.'s Algorithm 2 up to relabelling the state), and starts at zero: the chain starts at
rest and burn-in brings the momentum to its stationary spread (variance about
:math:`\epsilon \tau / (2 - \alpha)` per coordinate for small steps).

Why :math:`\eta = \epsilon / 2`: :math:`\epsilon` keeps its SGLD meaning. With :math:`\alpha = 1`
the momentum is forgotten at every step and the update *is* SGLD with step size
:math:`\epsilon` (:mod:`ppl_bnn.methods.sgld`). For a Gaussian target with precision
:math:`\Lambda` and a constant step the chain is linear, and its stationary distribution is exactly
Gaussian with the target's mean and covariance

.. math::

    \tau \Lambda^{-1} \Big(I - \frac{\epsilon \Lambda}{4 (2 - \alpha)}\Big)^{-1}
    \;\xrightarrow[\epsilon \to 0]{}\; \tau \Lambda^{-1},

so the posterior (:math:`\tau = 1`) up to a discretisation bias that is SGLD's
(:math:`\alpha = 1`) or smaller; the chain is stable when :math:`\epsilon \lambda_{\max}(\Lambda)
< 4 (2 - \alpha)` (SGLD: 4). With :math:`\hat\beta = 0` nothing corrects for the minibatch
gradient noise: noise of covariance :math:`V` in :math:`\nabla \log \tilde p` raises the effective
temperature to about :math:`\tau + \epsilon V / (4 \alpha)`, so small friction needs small steps
with small batches. Smaller friction mixes the mean faster (integrated autocorrelation about
:math:`4 \alpha / (\epsilon \lambda)` steps instead of SGLD's :math:`4 / (\epsilon \lambda)`)
but relaxes the spread no faster than about :math:`1 / \alpha` steps; near critical damping,
:math:`\alpha \approx \sqrt{2 \epsilon \lambda}`, does both well.

Reference: T. Chen, E. B. Fox, C. Guestrin. Stochastic Gradient Hamiltonian Monte Carlo. ICML 2014
(arXiv:1402.4102).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.checks import check_positive_float
from ppl_bnn.methods.sgmcmc import (
    STEP_RATE,
    SGMCMCInfo,
    SGMCMCOptions,
    noise_schedule,
    step_size_schedule,
)

__all__ = ["SGHMCOptions", "SGHMCState", "sghmc"]


@dataclass(frozen=True, kw_only=True)
class SGHMCOptions(SGMCMCOptions):
    """Options of ``fit(..., method="sghmc")``: those of :class:`SGMCMCOptions` plus

    Attributes:
        friction: :math:`\\alpha \\in (0, 1]`, one minus the momentum's decay per step; 1 is SGLD.
    """

    friction: float = 0.1

    @property
    def step_rate(self) -> float:
        r"""The default step size per training point: ``friction`` times
        :data:`~ppl_bnn.methods.sgmcmc.STEP_RATE`.

        Under a steady gradient the momentum moves the chain :math:`\epsilon / (2 \alpha)`
        times the gradient per step, against SGLD's :math:`\epsilon / 2`: this rate gives it
        ``sgld``'s default move. At ``STEP_RATE`` itself, with a learned noise, its chains ran
        hot: on a set with tiny residuals (naval-propulsion-plant) it predicted no better than
        the constant predictor, and in the cyclical schedule it diverged at the start of a
        later cycle on several UCI sets. At this rate it did better on every UCI set tried
        (``benchmarks/defaults_audit.py``; docs/defaults.md).
        """
        return self.friction * STEP_RATE

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_float("friction", self.friction)
        if not self.friction <= 1:
            raise ValueError(f"friction must be in (0, 1], got {self.friction!r}")

    def kernel(
        self, cos: Callable[[Any], Any] = math.cos, step_size: Any = None
    ) -> tuple[Callable[..., SGHMCState], Callable[..., tuple[SGHMCState, SGMCMCInfo]]]:
        """:func:`sghmc` configured by these options (``cos``, ``step_size``: see
        :func:`step_size_schedule`)."""
        return sghmc(
            step_size_schedule(self, cos, step_size),
            self.temperature,
            self.friction,
            noise_scale=noise_schedule(self),
        )


class SGHMCState(NamedTuple):
    """What one step carries to the next: position, momentum (both unconstrained) and step count."""

    position: dict[str, Any]
    momentum: dict[str, Any]
    step: Any


def sghmc(
    schedule: Callable[[Any], Any],
    temperature: float,
    friction: float,
    noise_scale: Callable[[Any], Any] | None = None,
) -> tuple[Callable[..., SGHMCState], Callable[..., tuple[SGHMCState, SGMCMCInfo]]]:
    """Build the SGHMC update as a pure ``(init, step)`` pair.

    ``init(position)`` starts at rest (zero momentum). ``step(state, log_density, grad, noise)``
    takes the log density and its gradient at ``state.position`` and standard-normal ``noise``
    shaped like the position; it uses only ``+``, ``*`` and ``**`` so that JAX arrays and torch
    tensors both work. ``noise_scale(t)`` (default: always 1) multiplies step ``t``'s noise: 0
    in the cyclical schedule's exploration phases, where the update is SGD with momentum
    (:func:`~ppl_bnn.methods.sgmcmc.noise_schedule`).
    """
    decay = 1.0 - friction
    scale_noise = noise_scale or (lambda t: 1.0)

    def init(position: Mapping[str, Any]) -> SGHMCState:
        position = dict(position)
        return SGHMCState(position, {k: 0.0 * z for k, z in position.items()}, step=0)

    def step(
        state: SGHMCState, log_density: Any, grad: Mapping[str, Any], noise: Mapping[str, Any]
    ) -> tuple[SGHMCState, SGMCMCInfo]:
        eps = schedule(state.step)
        spread = (friction * eps * temperature) ** 0.5 * scale_noise(state.step)
        momentum = {
            k: decay * v + 0.5 * eps * grad[k] + spread * noise[k]
            for k, v in state.momentum.items()
        }
        position = {k: z + momentum[k] for k, z in state.position.items()}
        return SGHMCState(position, momentum, state.step + 1), SGMCMCInfo(eps, log_density)

    return init, step


METHOD = Method(
    name="sghmc",
    summary="stochastic-gradient HMC with friction",
    options=SGHMCOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_burnin": 10, "num_samples": 5, "thinning": 2, "batch_size": 8},
    driver="sgmcmc",
)
