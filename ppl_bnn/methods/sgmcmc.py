r"""Stochastic-gradient MCMC: what SGLD and SGHMC share (options, drivers, divergence handling).

An SG-MCMC method's options build its update, ``options.kernel() -> (init, step)``, a pure pair of
functions over an explicit state:

- ``init(position) -> state`` takes the unconstrained start ``{site: array}``;
- ``step(state, log_density, grad, noise) -> (new_state, info)`` takes the (minibatch) log
  density :math:`\log \tilde p` and its gradient at ``state.position`` and standard-normal
  ``noise`` shaped like the position, and returns the next state and an :class:`SGMCMCInfo`.

Both are written with array arithmetic only (``+``, ``*``, ``**``), so they run on JAX arrays and
torch tensors alike. A state is a ``NamedTuple`` with a ``position`` field (``{site: array}``), a
``step`` field (the step count :math:`t`) and any further fields as dicts keyed like ``position``
(SGHMC's momentum).

On the unconstrained parameters :math:`z` (with :math:`\theta = T(z)`), the target is

.. math::

    \log \tilde p(z) = \log p(T(z)) + \frac{N}{b} \sum_{i \in B} \log p(y_i \mid x_i, T(z))
        + \log|\det J_T(z)|

for a minibatch :math:`B` of size :math:`b` drawn without replacement at every step (the
:math:`N/b` scaling is the model's ``likelihood_scale``). Step sizes follow
:math:`\epsilon_t = a` (``schedule="constant"``) or :math:`\epsilon_t = a (b_0 + t)^{-\gamma}`
(``schedule="polynomial"``); temperature :math:`\tau` 1 targets the posterior, other values
:math:`p^{1/\tau}` (labelled tempered).

Two drivers (``sgmcmc`` in each backend folder) feed the ``step``: a JAX one (``lax.scan`` per
chain, chains vectorised with ``vmap``) and a torch one (a Python loop per chain with its own
``torch.Generator``, moving one flat vector on the Pyro model's flat potential,
``torch.jit.trace``-d by default). A step whose log density or state is not finite stops that
chain; the draws taken before it are kept (chains are cut to a common length)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ppl_bnn.backends.base import Target
from ppl_bnn.methods.base import RunOutput, backend_option
from ppl_bnn.methods.checks import (
    check_batch_size,
    check_bool,
    check_positive_float,
    check_positive_int,
)
from ppl_bnn.methods.divergence import diverged
from ppl_bnn.methods.minibatch import batch_schedule
from ppl_bnn.model.bnn import BNN
from ppl_bnn.seeding import child_seed, numpy_generator

logger = logging.getLogger(__name__)

SCHEDULES = ("constant", "polynomial")
#: Above this many training points the default batch size is :data:`DEFAULT_BATCH_SIZE`.
FULL_BATCH_LIMIT = 1000
DEFAULT_BATCH_SIZE = 128


@dataclass(frozen=True, kw_only=True)
class SGMCMCOptions:
    """Options every SG-MCMC method takes.

    Attributes:
        num_samples: Kept draws per chain.
        num_burnin: Steps discarded before the first kept draw.
        thinning: Steps per kept draw (total steps: ``num_burnin + num_samples * thinning``).
        step_size: :math:`a`, the (initial) step size.
        schedule: ``"constant"`` or ``"polynomial"`` (:math:`a (b_0 + t)^{-\\gamma}`).
        schedule_offset: :math:`b_0` of the polynomial schedule.
        schedule_decay: :math:`\\gamma` of the polynomial schedule, in (0.5, 1].
        batch_size: Minibatch size; ``None`` is the full batch up to
            :data:`FULL_BATCH_LIMIT` points and :data:`DEFAULT_BATCH_SIZE` above.
        num_chains: Independent chains, each started from its own prior draw.
        temperature: :math:`\\tau`; 1 is the Bayesian posterior.
        jit: Pyro only: JIT-trace the flat potential once (``torch.jit.trace``); NumPyro always
            compiles.
    """

    num_samples: int = 1000
    num_burnin: int = 1000
    thinning: int = 10
    step_size: float = 1e-4
    schedule: str = "constant"
    schedule_offset: float = 1.0
    schedule_decay: float = 0.55
    batch_size: int | None = None
    num_chains: int = 1
    temperature: float = 1.0
    jit: bool = backend_option(True, "pyro")

    def __post_init__(self) -> None:
        check_positive_int("num_samples", self.num_samples)
        check_positive_int("num_burnin", self.num_burnin, minimum=0)
        check_positive_int("thinning", self.thinning)
        check_positive_float("step_size", self.step_size)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; allowed: {', '.join(SCHEDULES)}")
        check_positive_float("schedule_offset", self.schedule_offset)
        check_positive_float("schedule_decay", self.schedule_decay)
        if not 0.5 < self.schedule_decay <= 1:
            raise ValueError(f"schedule_decay must be in (0.5, 1], got {self.schedule_decay!r}")
        if self.batch_size is not None:
            check_positive_int("batch_size", self.batch_size)
        check_positive_int("num_chains", self.num_chains)
        check_positive_float("temperature", self.temperature)
        check_bool("jit", self.jit)

    @property
    def num_steps(self) -> int:
        return self.num_burnin + self.num_samples * self.thinning

    def resolved_batch_size(self, num_data: int) -> int:
        """The batch size used for ``num_data`` training points."""
        if self.batch_size is None:
            return num_data if num_data <= FULL_BATCH_LIMIT else DEFAULT_BATCH_SIZE
        return check_batch_size(self.batch_size, num_data)


def step_size_schedule(options: SGMCMCOptions) -> Callable[[Any], Any]:
    """:math:`t \\mapsto \\epsilon_t`; works on Python ints and traced JAX integers alike."""
    a = options.step_size
    if options.schedule == "constant":
        return lambda t: a + 0.0 * t
    b, gamma = options.schedule_offset, options.schedule_decay
    return lambda t: a * (b + t) ** (-gamma)


class SGMCMCInfo(NamedTuple):
    """About one step: its step size and the (minibatch) log density at the old position."""

    step_size: Any
    log_density: Any


#: ``position -> state``.
Init = Callable[[Mapping[str, Any]], Any]
#: ``(state, log_density, grad, noise) -> (state, info)``.
Step = Callable[[Any, Any, Mapping[str, Any], Mapping[str, Any]], tuple[Any, SGMCMCInfo]]


def site_fields(state: Any) -> tuple[str, ...]:
    """The state's fields that hold ``{site: array}`` dicts: all but ``step``."""
    return tuple(f for f in state._fields if f != "step")


def site_arrays(state: Any) -> list[Any]:
    return [v for f in site_fields(state) for v in getattr(state, f).values()]


def initial_positions(
    model: BNN, num_chains: int, seed: int, name: str
) -> list[dict[str, np.ndarray]]:
    """One prior draw per chain, mapped to unconstrained space (``log`` for positive sites)."""
    sites = {s.name: s for s in model.spec.sites()}
    out = []
    for chain in range(num_chains):
        params = model.init_params(child_seed(seed, f"{name}_init{chain}"))
        out.append({k: sites[k].prior.unconstrain(v) for k, v in params.items()})
    return out


def batch_schedules(
    num_data: int, batch: int, options: SGMCMCOptions, seed: int, name: str
) -> np.ndarray | None:
    """Every chain's minibatch indices per step, (chains, num_steps, batch) (see
    :mod:`ppl_bnn.methods.minibatch`); ``None`` when every step takes the full data."""
    if batch == num_data:
        return None
    rng = numpy_generator(seed, f"{name}_batches")
    return np.stack(
        [batch_schedule(num_data, batch, options.num_steps, rng) for _ in range(options.num_chains)]
    )


def kept_draws(diverged_at: np.ndarray, options: SGMCMCOptions) -> np.ndarray:
    """Per chain, how many kept draws precede its first non-finite step (all when none)."""
    kept = np.full(diverged_at.shape, options.num_samples)
    for chain, step in enumerate(diverged_at):
        if step >= 0:
            # Draw d is the position after step num_burnin + (d + 1) * thinning - 1.
            kept[chain] = max(
                0, min(options.num_samples, (step - options.num_burnin) // options.thinning)
            )
    return kept


def finish(
    name: str,
    target: Target,
    draws: dict[str, np.ndarray],
    stats: dict[str, np.ndarray],
    diverged_at: np.ndarray,
    sites: Sequence[str],
    options: SGMCMCOptions,
    timings: dict[str, float],
    info: dict[str, Any],
) -> RunOutput:
    """The driver's output: chains cut to the draws kept before any divergence.

    Args:
        diverged_at: Per chain, the step whose log density or state was not finite (-1: none).
        sites: The sites whose state became non-finite where a chain diverged (empty when only
            the log density was).
    """
    kept = kept_draws(diverged_at, options)
    steps = [int(s) if s >= 0 else None for s in diverged_at]
    info.update(
        {"tempered": options.temperature != 1.0, "diverged": False, "diverged_at_step": steps}
    )
    if not np.any(diverged_at >= 0):
        return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)
    breakdown = {
        "what": "a step gave a non-finite log density or state",
        "model": target.model,
        "step": steps,
        "sites": sites,
        "step_option": ("step_size", options.step_size),
    }
    if kept.min() == 0:
        raise diverged(name, context="before any draw was kept", **breakdown)
    info.update(diverged(name, **breakdown).details())
    n = int(kept.min())
    info["draws_dropped_to_align_chains"] = int(kept.sum() - n * len(kept))
    logger.warning("%s diverged at step(s) %s; keeping %d draws per chain", name, steps, n)
    draws = {k: v[:, :n] for k, v in draws.items()}
    stats = {k: v[:, :n] for k, v in stats.items()}
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)
