r"""Stochastic-gradient MCMC: what SGLD and SGHMC share (options, drivers, divergence handling).

An SG-MCMC method is a *builder* ``build(options) -> (init, step)``, a pure pair of functions over
an explicit state:

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

Two drivers feed a builder's ``step``: a JAX one (``lax.scan`` per chain, chains vectorised with
``vmap``) and a torch one (a Python loop per chain with its own ``torch.Generator``, moving one
flat vector on the Pyro model's flat potential, ``torch.jit.trace``-d by default). A step whose
log density or state is not finite stops that chain; the draws taken before it are kept (chains
are cut to a common length).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from ppl_bnn.methods.common import (
    DivergedError,
    RunOutput,
    check_batch_size,
    check_positive_float,
    check_positive_int,
)
from ppl_bnn.methods.minibatch import batch_schedule
from ppl_bnn.model import BNN
from ppl_bnn.seeding import child_seed, numpy_generator
from ppl_bnn.timing import now

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
    jit: bool = True

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
        if not isinstance(self.jit, bool):
            raise ValueError(f"jit must be True or False, got {self.jit!r}")

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
#: ``options -> (init, step)``.
Builder = Callable[[Any], tuple[Init, Step]]
#: ``(model, options, seed) -> RunOutput``, as :func:`ppl_bnn.registry.register` takes them.
Runner = Callable[[BNN, Any, int], RunOutput]


def _site_fields(state: Any) -> tuple[str, ...]:
    """The state's fields that hold ``{site: array}`` dicts: all but ``step``."""
    return tuple(f for f in state._fields if f != "step")


def _site_arrays(state: Any) -> list[Any]:
    return [v for f in _site_fields(state) for v in getattr(state, f).values()]


def _initial_positions(
    model: BNN, num_chains: int, seed: int, name: str
) -> list[dict[str, np.ndarray]]:
    """One prior draw per chain, mapped to unconstrained space (``log`` for positive sites)."""
    out = []
    for chain in range(num_chains):
        params = model.init_params(child_seed(seed, f"{name}_init{chain}"))
        sites = {s.name: s for s in model.spec.sites()}
        out.append({k: np.log(v) if sites[k].positive else v for k, v in params.items()})
    return out


def _batch_schedules(
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


def _kept_draws(diverged_at: np.ndarray, options: SGMCMCOptions) -> np.ndarray:
    """Per chain, how many kept draws precede its first non-finite step (all when none)."""
    kept = np.full(diverged_at.shape, options.num_samples)
    for chain, step in enumerate(diverged_at):
        if step >= 0:
            # Draw d is the position after step num_burnin + (d + 1) * thinning - 1.
            kept[chain] = max(
                0, min(options.num_samples, (step - options.num_burnin) // options.thinning)
            )
    return kept


def _finish(
    name: str,
    draws: dict[str, np.ndarray],
    stats: dict[str, np.ndarray],
    diverged_at: np.ndarray,
    options: SGMCMCOptions,
    timings: dict[str, float],
    info: dict[str, Any],
) -> RunOutput:
    kept = _kept_draws(diverged_at, options)
    info.update(
        {
            "tempered": options.temperature != 1.0,
            "diverged": bool(np.any(diverged_at >= 0)),
            "diverged_at_step": [int(s) if s >= 0 else None for s in diverged_at],
        }
    )
    if info["diverged"]:
        if kept.min() == 0:
            raise DivergedError(
                f"{name.upper()} diverged (non-finite value) at step(s) "
                f"{info['diverged_at_step']} before any draw was kept; "
                f"try a smaller step_size than {options.step_size}"
            )
        n = int(kept.min())
        info["draws_dropped_to_align_chains"] = int(kept.sum() - n * len(kept))
        logger.warning(
            "%s diverged at step(s) %s; keeping %d draws per chain",
            name.upper(),
            info["diverged_at_step"],
            n,
        )
        draws = {k: v[:, :n] for k, v in draws.items()}
        stats = {k: v[:, :n] for k, v in stats.items()}
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)


def run_numpyro(
    name: str, build: Builder, model: BNN, options: SGMCMCOptions, seed: int
) -> RunOutput:
    """Run ``build``'s sampler on NumPyro: ``lax.scan`` over steps, chains vectorised."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from ppl_bnn.backends import numpyro_backend as backend
    from ppl_bnn.program import constrain, site_transforms

    spec = model.spec
    x, y = backend.data(spec, model.x, model.y)
    n = model.num_data
    batch = options.resolved_batch_size(n)
    log_joint = backend.log_joint(spec)
    transforms = site_transforms(spec, backend.PPL_NUMPYRO)

    def log_density(z, xb, yb):
        theta, log_det = constrain(transforms, z)
        return log_joint(theta, xb, yb, n / batch) + log_det

    value_and_grad = jax.value_and_grad(log_density)
    init, step = build(options)

    def one_step(carry, inputs):
        state, diverged_at = carry
        key, idx = inputs
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        lp, grad = value_and_grad(state.position, xb, yb)
        leaves, tree = jax.tree.flatten(state.position)
        keys = jax.random.split(key, len(leaves))
        noise = jax.tree.unflatten(
            tree,
            [jax.random.normal(k, v.shape, v.dtype) for k, v in zip(keys, leaves, strict=True)],
        )
        new, info = step(state, lp, grad, noise)
        finite = jnp.isfinite(lp) & jnp.all(
            jnp.array([jnp.all(jnp.isfinite(v)) for v in _site_arrays(new)])
        )
        alive = diverged_at < 0
        ok = finite & alive

        def keep_finite(a, b):
            return jnp.where(ok, a, b)

        new = new._replace(
            **{
                f: jax.tree.map(keep_finite, getattr(new, f), getattr(state, f))
                for f in _site_fields(new)
            }
        )
        diverged_at = jnp.where(alive & ~finite, state.step, diverged_at)
        return (new, diverged_at), info

    def burn(carry, key, idx):
        keys = jax.random.split(key, options.num_burnin)
        carry, _ = lax.scan(one_step, carry, (keys, idx))
        return carry

    def draw(carry, inputs):
        key, idx = inputs
        keys = jax.random.split(key, options.thinning)
        carry, infos = lax.scan(one_step, carry, (keys, idx))
        theta, _ = constrain(transforms, carry[0].position)
        return carry, (theta, jax.tree.map(lambda v: v[-1], infos))

    def sample(carry, key, idx):
        return lax.scan(draw, carry, (jax.random.split(key, options.num_samples), idx))

    chains = options.num_chains
    starts = _initial_positions(model, chains, seed, name)
    position = {k: jnp.stack([jnp.asarray(s[k]) for s in starts]) for k in starts[0]}
    carry = (jax.vmap(init)(position), jnp.full((chains,), -1, dtype=jnp.int32))
    carry = (carry[0]._replace(step=jnp.zeros((chains,), jnp.int32)), carry[1])
    key_burn, key_sample = jax.random.split(jax.random.PRNGKey(child_seed(seed, name)))
    burn_keys = jax.random.split(key_burn, chains)
    sample_keys = jax.random.split(key_sample, chains)
    schedules = _batch_schedules(n, batch, options, seed, name)
    burn_idx = sample_idx = None
    if schedules is not None:
        burn_idx = jnp.asarray(schedules[:, : options.num_burnin])
        sample_idx = jnp.asarray(
            schedules[:, options.num_burnin :].reshape(
                chains, options.num_samples, options.thinning, batch
            )
        )

    start = now()
    burn_fn = jax.jit(jax.vmap(burn)).lower(carry, burn_keys, burn_idx).compile()
    sample_fn = jax.jit(jax.vmap(sample)).lower(carry, sample_keys, sample_idx).compile()
    compiled = now()
    carry = jax.block_until_ready(burn_fn(carry, burn_keys, burn_idx))
    warm = now()
    carry, (theta, infos) = jax.block_until_ready(sample_fn(carry, sample_keys, sample_idx))
    end = now()
    timings = {"compile": compiled - start, "warmup": warm - compiled, "sampling": end - warm}
    draws = {k: np.asarray(v) for k, v in theta.items()}
    stats = {"step_size": np.asarray(infos.step_size), "lp": np.asarray(infos.log_density)}
    info = {"batch_size": batch, "chain_method": "vectorized"}
    return _finish(name, draws, stats, np.asarray(carry[1]), options, timings, info)


def run_pyro(name: str, build: Builder, model: BNN, options: SGMCMCOptions, seed: int) -> RunOutput:
    """Run ``build``'s sampler on Pyro: a Python loop per chain, its own ``torch.Generator``.

    The chain moves one flat vector of unconstrained parameters on the Pyro model's flat
    potential (:class:`~ppl_bnn.backends.pyro_potential.FlatPotential`, traced unless
    ``jit=False``); the updates are elementwise, so a flat position takes the steps that one
    array per site would, at a fraction of the per-step cost.
    """
    import torch

    from ppl_bnn.backends import pyro_backend as backend
    from ppl_bnn.backends.pyro_potential import FlatPotential

    spec = model.spec
    x, y = backend.data(spec, model.x, model.y)
    n = model.num_data
    batch = options.resolved_batch_size(n)
    init, step = build(options)
    starts = _initial_positions(model, options.num_chains, seed, name)
    start = now()
    potential = FlatPotential(
        spec, x[:batch], y[:batch], likelihood_scale=n / batch,
        mode="traced" if options.jit else "eager",
    )  # fmt: skip
    timings = {"compile": now() - start, "warmup": 0.0, "sampling": 0.0}
    schedules = _batch_schedules(n, batch, options, seed, name)
    flat_per_chain, stats_per_chain, diverged_at = [], [], []
    for chain, position in enumerate(starts):
        batches = None if schedules is None else torch.from_numpy(schedules[chain]).long()
        generator = torch.Generator().manual_seed(child_seed(seed, f"{name}_chain{chain}"))
        state = init({"z": torch.as_tensor(potential.layout.flatten(position))})
        kept_z, chain_stats = [], {"step_size": [], "lp": []}
        diverged, warm = -1, None
        start = now()
        for t in range(options.num_steps):
            if t == options.num_burnin:
                warm = now()
            xb, yb = (x, y) if batches is None else (x[batches[t]], y[batches[t]])
            z = state.position["z"].detach().requires_grad_()
            energy = potential(z, xb, yb)
            (grad,) = torch.autograd.grad(energy, z)
            with torch.no_grad():
                noise = torch.randn(potential.size, generator=generator)
                new, info = step(state, -energy.detach(), {"z": -grad}, {"z": noise})
                finite = torch.isfinite(energy) and all(
                    torch.isfinite(v).all() for v in _site_arrays(new)
                )
            if not finite:
                diverged = t
                break
            state = new
            kept_step = t - options.num_burnin + 1
            if kept_step > 0 and kept_step % options.thinning == 0:
                kept_z.append(state.position["z"].numpy().copy())
                chain_stats["step_size"].append(float(info.step_size))
                chain_stats["lp"].append(float(info.log_density))
        end = now()
        warm = end if warm is None else warm
        timings["warmup"] += warm - start
        timings["sampling"] += end - warm
        diverged_at.append(diverged)
        flat_per_chain.append(kept_z)
        stats_per_chain.append(chain_stats)
    kept = _kept_draws(np.asarray(diverged_at), options)
    length = int(kept.min())
    flat = np.stack(
        [np.asarray(z[:length], dtype=np.float32).reshape(length, potential.size)
         for z in flat_per_chain]
    )  # fmt: skip
    # No draw at all only when a chain diverged at once, which _finish reports as an error.
    constrained = potential.constrained(flat) if length else {}
    draws = {k: v.astype(np.float32) for k, v in constrained.items()}
    stats = {
        k: np.stack([np.asarray(s[k][:length]) for s in stats_per_chain])
        for k in ("step_size", "lp")
    }
    info = {
        "batch_size": batch,
        "chain_method": "sequential",
        "potential": potential.mode,
        "torch_threads": torch.get_num_threads(),
    }
    return _finish(name, draws, stats, np.asarray(diverged_at), options, timings, info)


def runners(name: str, build: Builder) -> dict[str, Runner]:
    """``{backend: runner}`` for :func:`ppl_bnn.registry.register`: both drivers over ``build``.

    ``name`` labels the method in messages and keys its random streams (``f"{name}_init{c}"``
    for chain ``c``'s start, ``f"{name}_batches"`` for both backends' minibatches, ``name`` for
    the JAX sampler's noise, ``f"{name}_chain{c}"`` for torch's).
    """
    return {"numpyro": partial(run_numpyro, name, build), "pyro": partial(run_pyro, name, build)}
