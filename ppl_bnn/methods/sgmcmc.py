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
:math:`\epsilon_t = a` (``schedule="constant"``), :math:`\epsilon_t = a (b_0 + t)^{-\gamma}`
(``schedule="polynomial"``) or the cyclical cosine schedule of Zhang et al. (2020, Eq. 1;
``schedule="cyclical"``) over :math:`M` cycles of :math:`L` steps,

.. math:: \epsilon_t = \frac{a}{2}\Big[\cos\Big(\pi \frac{t \bmod L}{L}\Big) + 1\Big],

where each cycle first explores (the share ``exploration`` of it: the update without its noise,
an optimiser taking large steps towards a mode) and then samples (the full update at the small
steps near the cycle's end); draws are kept only in the sampling phase (Zhang et al. 2020,
Algorithm 1). Temperature :math:`\tau` 1 targets the posterior, other values
:math:`p^{1/\tau}` (labelled tempered).

The drivers run ``num_burnin`` steps, then ``num_blocks`` blocks of ``thinning`` steps, keeping
the position at the end of each block that :meth:`SGMCMCOptions.kept_blocks` marks (all of them
but for the cyclical schedule's exploration phases).

Two drivers (``sgmcmc`` in each backend folder) feed the ``step``: a JAX one (``lax.scan`` per
chain, chains vectorised with ``vmap``) and a torch one (a Python loop per chain with its own
``torch.Generator``, moving one flat vector on the Pyro model's flat potential,
``torch.jit.trace``-d by default). A step whose log density or state is not finite stops that
chain; the draws taken before it are kept (chains are cut to a common length)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput, backend_option
from ppl_bnn.methods.checks import (
    check_batch_size,
    check_bool,
    check_positive_float,
    check_positive_int,
)
from ppl_bnn.methods.divergence import diverged
from ppl_bnn.methods.initialisation import seeded_values
from ppl_bnn.methods.minibatch import batch_schedule
from ppl_bnn.model.bnn import BNN
from ppl_bnn.seeding import child_seed, numpy_generator

logger = logging.getLogger(__name__)

SCHEDULES = ("constant", "polynomial", "cyclical")
#: Above this many training points the default batch size is :data:`DEFAULT_BATCH_SIZE`.
FULL_BATCH_LIMIT = 1000
DEFAULT_BATCH_SIZE = 128
#: The default step size per training point: ``step_size = STEP_RATE / N``.
STEP_RATE = 0.05
#: Where a chain may start (:attr:`SGMCMCOptions.init_loc`).
SGMCMC_INIT_LOCS = ("scaled", "prior")


@dataclass(frozen=True, kw_only=True)
class SGMCMCOptions:
    """Options every SG-MCMC method takes.

    Attributes:
        num_samples: Kept draws per chain.
        num_burnin: Steps discarded before the first kept draw.
        thinning: Steps per kept draw (total steps: ``num_burnin + num_samples * thinning``, and
            the exploration phases under the cyclical schedule).
        step_size: :math:`a`, the (initial; the cyclical schedule's largest) step size, or
            ``None`` (the default) for :attr:`step_rate` divided by the number of training
            points :math:`N` (:meth:`for_data`). The log density sums over the :math:`N`
            points, so a fixed :math:`a` moves a chain :math:`a N / 2` times the mean
            per-point gradient: a step that works on 500 points is 15 times too long on 7,500.
            A rate per point keeps the move the same at every :math:`N`, as SGD's learning rate
            on the mean loss does (Zhang et al. 2020 set their step size so). 0.05 is the
            rate (:data:`STEP_RATE`) that the UCI suite's step sizes come to
            (``benchmarks/uci.toml``: 5e-6 to 7e-6 on 7,000 to 11,000 points, 1.2e-6 on
            41,157).
        schedule: ``"constant"``, ``"polynomial"`` (:math:`a (b_0 + t)^{-\\gamma}`) or
            ``"cyclical"`` (cosine cycles, Zhang et al. 2020; ``num_burnin`` must be 0, as each
            cycle explores before it samples).
        schedule_offset: :math:`b_0` of the polynomial schedule.
        schedule_decay: :math:`\\gamma` of the polynomial schedule, in (0.5, 1].
        num_cycles: :math:`M`, cycles of the cyclical schedule; each keeps
            ``num_samples / num_cycles`` draws, so ``num_samples`` must be a multiple of it.
        exploration: Share of each cycle spent exploring (no noise, no draws kept) under the
            cyclical schedule, in [0, 1); the sampling phase is ``thinning`` steps per kept draw
            and the exploration phase the whole number of such blocks nearest
            ``exploration / (1 - exploration)`` times it.
        batch_size: Minibatch size; ``None`` is the full batch up to
            :data:`FULL_BATCH_LIMIT` points and :data:`DEFAULT_BATCH_SIZE` above.
        num_chains: Independent chains, each started from its own draw of ``init_loc``.
        init_loc: Where each chain starts: ``"scaled"`` (the default), the fan-in-scaled draw
            that ``map`` starts from (:func:`~ppl_bnn.methods.initialisation.scaled_values`,
            LeCun et al. 1998), or ``"prior"``, a prior draw. A prior draw with unit scale on
            a layer of :math:`d` inputs gives pre-activations of spread :math:`\\sqrt d`: tanh
            and ReLU units saturate or blow up, the first gradients are huge, and SGHMC's
            momentum adds up about :math:`1 / \\alpha` of them (with a learned noise, SGHMC
            could diverge within its first steps from there; docs/defaults.md).
        temperature: :math:`\\tau`; 1 is the Bayesian posterior.
        jit: Pyro only: JIT-trace the flat potential once (``torch.jit.trace``); NumPyro always
            compiles.
    """

    num_samples: int = 1000
    num_burnin: int = 1000
    thinning: int = 10
    step_size: float | None = None
    schedule: str = "constant"
    schedule_offset: float = 1.0
    schedule_decay: float = 0.55
    batch_size: int | None = None
    num_chains: int = 1
    init_loc: str = "scaled"
    num_cycles: int = 4
    exploration: float = 0.8
    temperature: float = 1.0
    jit: bool = backend_option(True)

    @property
    def step_rate(self) -> float:
        """The default step size per training point (see ``step_size``): :data:`STEP_RATE`."""
        return STEP_RATE

    @property
    def kept_draws(self) -> int:
        """Draws the result holds (:mod:`ppl_bnn.methods.memory`)."""
        return self.num_chains * self.num_samples

    def matrix_floats(self, num_weights: int) -> int:
        """Floats of the largest matrix the fit holds beyond its draws: none."""
        return 0

    def __post_init__(self) -> None:
        check_positive_int("num_samples", self.num_samples)
        check_positive_int("num_burnin", self.num_burnin, minimum=0)
        check_positive_int("thinning", self.thinning)
        if self.step_size is not None:
            check_positive_float("step_size", self.step_size)
        if self.init_loc not in SGMCMC_INIT_LOCS:
            raise ValueError(
                f"unknown init_loc {self.init_loc!r} for an SG-MCMC chain; available: "
                f"{', '.join(SGMCMC_INIT_LOCS)}"
            )
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
        check_positive_int("num_cycles", self.num_cycles)
        if isinstance(self.exploration, bool) or not (
            isinstance(self.exploration, int | float) and 0 <= self.exploration < 1
        ):
            raise ValueError(f"exploration must be a number in [0, 1), got {self.exploration!r}")
        if self.schedule == "cyclical":
            if self.num_burnin:
                raise ValueError(
                    "the cyclical schedule explores at the start of every cycle: num_burnin must "
                    f"be 0, got {self.num_burnin}"
                )
            if self.num_samples % self.num_cycles:
                raise ValueError(
                    f"num_samples {self.num_samples} is not a multiple of num_cycles "
                    f"{self.num_cycles}: every cycle keeps the same number of draws"
                )

    @property
    def exploration_blocks(self) -> int:
        """Blocks of ``thinning`` steps that open each cycle without a kept draw (0 unless the
        schedule is cyclical)."""
        if self.schedule != "cyclical":
            return 0
        per_cycle = self.num_samples // self.num_cycles
        return round(per_cycle * self.exploration / (1 - self.exploration))

    @property
    def cycle_length(self) -> int:
        """:math:`L`, steps per cycle of the cyclical schedule."""
        return (self.exploration_blocks + self.num_samples // self.num_cycles) * self.thinning

    @property
    def num_blocks(self) -> int:
        """Blocks of ``thinning`` steps after the burn-in, each ending at a candidate draw."""
        if self.schedule != "cyclical":
            return self.num_samples
        return self.num_cycles * self.cycle_length // self.thinning

    @property
    def num_steps(self) -> int:
        return self.num_burnin + self.num_blocks * self.thinning

    def for_data(self, num_data: int) -> SGMCMCOptions:
        """These options with ``step_size`` resolved for ``num_data`` training points
        (:attr:`step_rate` / ``num_data`` where it is ``None``)."""
        if self.step_size is not None:
            return self
        return replace(self, step_size=self.step_rate / num_data)

    def initial_positions(self, model: BNN, seed: int, name: str) -> list[dict[str, np.ndarray]]:
        """Each chain's unconstrained start, one draw of ``init_loc`` per chain
        (:func:`initial_positions`)."""
        return initial_positions(model, self.num_chains, seed, name, self.init_loc)

    def kept_blocks(self) -> np.ndarray:
        """Per block, whether its last position is a kept draw: all but the cyclical schedule's
        exploration blocks."""
        kept = np.ones(self.num_blocks, dtype=bool)
        if self.schedule == "cyclical":
            per_cycle = self.cycle_length // self.thinning
            kept[np.arange(self.num_blocks) % per_cycle < self.exploration_blocks] = False
        return kept

    def resolved_batch_size(self, num_data: int) -> int:
        """The batch size used for ``num_data`` training points."""
        if self.batch_size is None:
            return num_data if num_data <= FULL_BATCH_LIMIT else DEFAULT_BATCH_SIZE
        return check_batch_size(self.batch_size, num_data)


@dataclass(frozen=True, kw_only=True)
class CyclicalOptions(SGMCMCOptions):
    """The defaults of the cyclical methods (``csgld``, ``csghmc``), put before their base
    method's options (``class CSGLDOptions(CyclicalOptions, SGLDOptions)``): the cyclical
    schedule, which they alone take, no burn-in, and 200 draws. With ``num_cycles=4``,
    ``thinning=10`` and ``exploration=0.8`` that is 10,000 steps, about as many as the defaults
    of ``sgld``; ``step_size`` is the step size at the start of each cycle, the largest."""

    schedule: str = "cyclical"
    num_burnin: int = 0
    num_samples: int = 200

    @property
    def step_rate(self) -> float:
        """The default peak step size per training point: half the constant schedule's.

        Each cycle's exploration is an optimiser (no noise), and with a learned noise on a
        small, noisy set it found modes that fit the training noise: at the full rate ``csgld``
        predicted diabetes about as well as the constant predictor, and clearly better at half
        of it (``tests/methods/test_defaults.py`` keeps it so). On the UCI sets halving it lost
        a fraction of a nat on some and gained on others (``benchmarks/defaults_audit.py``).
        For ``csghmc`` the full rate (``sghmc``'s) threw the chains out of the narrow region of
        a high noise precision at the next cycle's peak, where they diverged
        (naval-propulsion-plant, both backends)."""
        return super().step_rate / 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.schedule != "cyclical":
            raise ValueError(
                f"a cyclical method takes schedule 'cyclical' only, got {self.schedule!r} "
                "(sgld and sghmc take the other schedules)"
            )


def step_size_schedule(
    options: SGMCMCOptions, cos: Callable[[Any], Any] = math.cos, step_size: Any = None
) -> Callable[[Any], Any]:
    """:math:`t \\mapsto \\epsilon_t`; works on Python ints and traced JAX integers alike, given
    the array library's ``cos`` for the cyclical schedule (``jnp.cos`` for traced integers).
    ``step_size``, where given, stands for ``options.step_size``: a compiled program's argument,
    so that one program serves every step size (a tuning grid's)."""
    a = options.step_size if step_size is None else step_size
    if options.schedule == "constant":
        return lambda t: a + 0.0 * t
    if options.schedule == "cyclical":
        length = options.cycle_length
        return lambda t: 0.5 * a * (cos(math.pi * (t % length) / length) + 1.0)
    b, gamma = options.schedule_offset, options.schedule_decay
    return lambda t: a * (b + t) ** (-gamma)


def noise_schedule(options: SGMCMCOptions) -> Callable[[Any], Any]:
    """:math:`t \\mapsto` 1 where step :math:`t` injects the update's noise, 0 where it does not
    (the cyclical schedule's exploration phases); arithmetic only, like
    :func:`step_size_schedule`."""
    if options.schedule != "cyclical":
        return lambda t: 1.0 + 0.0 * t
    length, exploring = options.cycle_length, options.exploration_blocks * options.thinning
    return lambda t: 1.0 * (t % length >= exploring)


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
    model: BNN, num_chains: int, seed: int, name: str, init_loc: str = "scaled"
) -> list[dict[str, np.ndarray]]:
    """One start per chain, each its own seeded draw (fan-in-scaled or from the prior), mapped
    to unconstrained space (``log`` for positive sites)."""
    sites = {s.name: s for s in model.spec.sites()}
    out = []
    for chain in range(num_chains):
        params = seeded_values(model, init_loc, child_seed(seed, f"{name}_init{chain}"))
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


def completed_blocks(diverged_at: np.ndarray, options: SGMCMCOptions) -> np.ndarray:
    """Per chain, how many blocks end before its first non-finite step (all when none)."""
    done = np.full(diverged_at.shape, options.num_blocks)
    for chain, step in enumerate(diverged_at):
        if step >= 0:
            # Block d ends with the position after step num_burnin + (d + 1) * thinning - 1.
            done[chain] = max(
                0, min(options.num_blocks, (step - options.num_burnin) // options.thinning)
            )
    return done


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
    """The driver's output: the kept blocks' draws, chains cut to the blocks every chain
    completed before any divergence.

    Args:
        draws, stats: Per chain, one entry per completed block (``(chains, blocks, ...)``).
        diverged_at: Per chain, the step whose log density or state was not finite (-1: none).
        sites: The sites whose state became non-finite where a chain diverged (empty when only
            the log density was).
    """
    done = completed_blocks(diverged_at, options)
    blocks = int(done.min())
    kept = options.kept_blocks()
    steps = [int(s) if s >= 0 else None for s in diverged_at]
    info.update(
        {"tempered": options.temperature != 1.0, "diverged": False, "diverged_at_step": steps}
    )
    if options.schedule == "cyclical":
        info["cycle_length"] = options.cycle_length
    draws = {k: v[:, :blocks][:, kept[:blocks]] for k, v in draws.items()}
    stats = {k: v[:, :blocks][:, kept[:blocks]] for k, v in stats.items()}
    if not np.any(diverged_at >= 0):
        return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)
    breakdown = {
        "what": "a step gave a non-finite log density or state",
        "model": target.model,
        "step": steps,
        "sites": sites,
        "step_option": ("step_size", options.step_size),
    }
    n = int(kept[:blocks].sum())
    if n == 0:
        raise diverged(name, context="before any draw was kept", **breakdown)
    info.update(diverged(name, **breakdown).details())
    info["draws_dropped_to_align_chains"] = int(
        sum(kept[: int(d)].sum() for d in done) - n * len(done)
    )
    logger.warning("%s diverged at step(s) %s; keeping %d draws per chain", name, steps, n)
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)
