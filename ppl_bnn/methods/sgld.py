r"""Stochastic-gradient Langevin dynamics (``sgld``; Welling & Teh 2011).

On the unconstrained parameters :math:`z`, with the minibatch log density :math:`\log \tilde p`,
step sizes :math:`\epsilon_t` and temperature :math:`\tau` of :mod:`ppl_bnn.methods.sgmcmc`, each
step moves

.. math::

    z_{t+1} = z_t + \frac{\epsilon_t}{2} \nabla_z \log \tilde p(z_t)
        + \sqrt{\epsilon_t \tau}\, \xi_t, \qquad \xi_t \sim \mathcal N(0, I).

The update is one pure ``(init, step)`` pair over an explicit :class:`SGLDState`, written with
array arithmetic only; the drivers of :mod:`ppl_bnn.methods.sgmcmc` (JAX ``lax.scan``, torch loop)
feed it gradients and noise and handle divergence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.sgmcmc import (
    SGMCMCInfo,
    SGMCMCOptions,
    noise_schedule,
    step_size_schedule,
)

__all__ = ["SGLDOptions", "SGLDState", "sgld", "step_size_schedule"]


@dataclass(frozen=True, kw_only=True)
class SGLDOptions(SGMCMCOptions):
    """Options of ``fit(..., method="sgld")``: those of :class:`SGMCMCOptions`, nothing more."""

    def kernel(
        self, cos: Callable[[Any], Any] = math.cos, step_size: Any = None
    ) -> tuple[Callable[..., SGLDState], Callable[..., tuple[SGLDState, SGMCMCInfo]]]:
        """:func:`sgld` configured by these options (``cos``, ``step_size``: see
        :func:`step_size_schedule`)."""
        return sgld(
            step_size_schedule(self, cos, step_size),
            self.temperature,
            noise_scale=noise_schedule(self),
        )


class SGLDState(NamedTuple):
    """What one step carries to the next: the unconstrained position and the step count."""

    position: dict[str, Any]
    step: Any


def sgld(
    schedule: Callable[[Any], Any],
    temperature: float,
    noise_scale: Callable[[Any], Any] | None = None,
) -> tuple[Callable[..., SGLDState], Callable[..., tuple[SGLDState, SGMCMCInfo]]]:
    """Build the SGLD update as a pure ``(init, step)`` pair.

    ``step(state, log_density, grad, noise)`` takes the log density and its gradient at
    ``state.position`` and standard-normal ``noise`` shaped like the position; it uses only
    ``+``, ``*`` and ``**`` so that JAX arrays and torch tensors both work. ``noise_scale(t)``
    (default: always 1) multiplies step ``t``'s noise: 0 in the cyclical schedule's exploration
    phases, where the update is SGD (:func:`~ppl_bnn.methods.sgmcmc.noise_schedule`).
    """
    scale_noise = noise_scale or (lambda t: 1.0)

    def init(position: Mapping[str, Any]) -> SGLDState:
        return SGLDState(position=dict(position), step=0)

    def step(
        state: SGLDState, log_density: Any, grad: Mapping[str, Any], noise: Mapping[str, Any]
    ) -> tuple[SGLDState, SGMCMCInfo]:
        eps = schedule(state.step)
        spread = (eps * temperature) ** 0.5 * scale_noise(state.step)
        position = {
            k: z + 0.5 * eps * grad[k] + spread * noise[k] for k, z in state.position.items()
        }
        return SGLDState(position, state.step + 1), SGMCMCInfo(eps, log_density)

    return init, step


METHOD = Method(
    name="sgld",
    summary="stochastic-gradient Langevin dynamics",
    options=SGLDOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_burnin": 10, "num_samples": 5, "thinning": 2, "batch_size": 8},
    driver="sgmcmc",
)
