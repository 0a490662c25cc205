"""The ``mclmc`` driver on NumPyro: BlackJAX's MCLMC tuner and kernel on the model's log density
over one flat unconstrained vector, chains vectorised (see :mod:`ppl_bnn.methods.mclmc`). The
tuning, sampling, freezing and dropping of chains here serve the adjusted sampler too
(:mod:`ppl_bnn.backends.numpyro.mams`), which brings its own :class:`Dynamics`.

Tuning and sampling are two compiled programs, each over every chain at once (``vmap``), so
that they are timed apart. A chain that comes out *frozen* (:func:`frozen_reason`) is tuned and
sampled once more from a starting step size :data:`RETUNE_FACTOR` times smaller, and dropped
from the draws if it freezes again; ``info`` records both (``frozen_chains``,
``dropped_chains``), and a fit whose every chain is dropped raises
:class:`~ppl_bnn.methods.base.DivergedError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
from jax import lax

from ppl_bnn.backends.numpyro.flat import FlatDensity, flat_density
from ppl_bnn.backends.numpyro.programs import compiled
from ppl_bnn.backends.numpyro.starts import ensemble_starts, start_seconds
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import DivergedError, RunOutput
from ppl_bnn.methods.divergence import diverged
from ppl_bnn.methods.mclmc import TUNING_FRACTIONS, MCLMCOptions
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import CompileClock, now

logger = logging.getLogger(__name__)

#: A chain whose tuned step size is below this share of the one its tuning started from (or not
#: finite) is frozen. Healthy tuning ends far *above* its start (from 1e-3: 0.05 to 3 on small
#: test networks, 0.7 to 1.4 on bostonHousing's 751 weights), while the tuner's collapse ends at
#: zero: it averages xi / step_size**6, which overflows float32 once the step size nears 2e-8,
#: and then returns exactly 0 (or it shrinks the step size by 0.8 per non-finite step: a
#: millionth after some 60 in a row). A chain at a millionth of a 1e-3 start moves 1e-9 per
#: step in preconditioned units, where the posterior has unit scale: no tuning ends there.
FROZEN_STEP_RATIO = 1e-6
#: A frozen chain is retuned once from its starting step size divided by this.
RETUNE_FACTOR = 10.0


class _Chains(NamedTuple):
    """What an attempt gives per chain, each array with the chains first."""

    draws: dict[str, np.ndarray]  # site -> (chain, draw, *site_shape), constrained
    stats: dict[str, np.ndarray]  # stat -> (chain, draw)
    step_size: np.ndarray  # (chain,)
    L: np.ndarray  # (chain,)
    summary: dict[str, np.ndarray]  # name -> (chain,): Dynamics.summary of the kept draws


class Dynamics(NamedTuple):
    """One microcanonical sampler, as the shared driver runs it.

    Attributes:
        name: Its method's name (program cache keys, seeds' purposes).
        programs: ``(density, options) -> (tune, sample)``, each over every chain at once:
            ``tune(starts, keys, step_sizes, data) -> (states, params)`` and
            ``sample(states, params, keys, data) -> {"position", "lp", "diverging", ...}``, one
            entry per kept draw (the rest become sample stats).
        sizes: ``options ->`` the options that shape the programs (their cache key).
        summary: ``(stats, dim) -> {name: (chain,)}``, per-chain values for ``info``.
        start_step: ``(options, dim) ->`` the step size the tuner starts from.
    """

    name: str
    programs: Callable[[FlatDensity, Any], tuple[Callable, Callable]]
    sizes: Callable[[Any], tuple]
    summary: Callable[[dict[str, np.ndarray], int], dict[str, np.ndarray]]
    start_step: Callable[[Any, int], float] = lambda options, dim: options.step_size


def _starts(
    name: str, target: Target, options: Any, seed: int, density: FlatDensity
) -> tuple[jax.Array, dict[str, Any]]:
    """The chains' flat unconstrained starts (chain, d) and what making them cost and gave:
    U(-2, 2) per coordinate, or a deep ensemble's modes (:mod:`ppl_bnn.methods.starts`; as
    many chains as members that did not diverge)."""
    if options.init == "ensemble":
        starts, info = ensemble_starts(name, target, options.num_chains, seed)
        return jax.vmap(density.flatten)(starts), info
    key = jax.random.PRNGKey(child_seed(seed, "mclmc_init"))
    shape = (options.num_chains, density.dim)
    return jax.random.uniform(key, shape, jnp.float32, minval=-2.0, maxval=2.0), {}


def _programs(density: FlatDensity, options: MCLMCOptions) -> tuple[Callable, Callable]:
    """Unadjusted MCLMC's ``tune`` and ``sample`` (see :class:`Dynamics`); its draws' stats:
    the last step's energy change, and whether a step was reverted."""
    kernel = blackjax.mcmc.mclmc.build_kernel()
    frac1, frac2, frac3 = TUNING_FRACTIONS

    def tune(position, key, step_size, data):
        logdensity = partial(density.log_density, data=data)
        init_key, tune_key = jax.random.split(key)
        state = blackjax.mcmc.mclmc.init(position, logdensity, init_key)
        start = MCLMCAdaptationState(
            L=jnp.sqrt(density.dim), step_size=step_size, inverse_mass_matrix=jnp.ones(density.dim)
        )
        state, params, _ = blackjax.mclmc_find_L_and_step_size(
            mclmc_kernel=kernel, num_steps=options.num_warmup, state=state, rng_key=tune_key,
            logdensity_fn=logdensity, frac_tune1=frac1, frac_tune2=frac2, frac_tune3=frac3,
            desired_energy_var=options.desired_energy_var,
            diagonal_preconditioning=options.diagonal_preconditioning, params=start,
        )  # fmt: skip
        return state, params

    def sample(state, params, key, data):
        logdensity = partial(density.log_density, data=data)

        def step(state, key):
            return kernel(
                key, state, logdensity, params.inverse_mass_matrix, params.L, params.step_size
            )

        def block(state, key):  # ``thinning`` steps, keeping the last position
            state, info = lax.scan(step, state, jax.random.split(key, options.thinning))
            # BlackJAX reverts a step that is not finite (``nonans`` False): a divergence.
            reverted = ~jnp.all(info.nonans)
            return state, {
                "position": state.position,
                "lp": state.logdensity,
                "energy_change": info.energy_change[-1],
                "diverging": reverted,
            }

        _, kept = lax.scan(block, state, jax.random.split(key, options.num_samples))
        return kept

    in_axes = (0, 0, 0, None)
    return jax.vmap(tune, in_axes=in_axes), jax.vmap(sample, in_axes=in_axes)


def _energy_var(stats: dict[str, np.ndarray], dim: int) -> dict[str, np.ndarray]:
    """The energy error's variance per dimension (its mean is about 0), from the last step of
    each kept draw; on BNNs a few large errors can dominate it, where the tuner's own estimate
    weighs them down."""
    return {"energy_var": np.mean(np.square(stats["energy_change"]), axis=1) / dim}


UNADJUSTED = Dynamics(
    name="mclmc",
    programs=_programs,
    sizes=lambda o: (o.num_warmup, o.desired_energy_var, o.diagonal_preconditioning),
    summary=_energy_var,
)


def frozen_reason(
    start_step_size: float,
    step_size: float,
    inverse_mass: np.ndarray,
    tuned: np.ndarray,
    positions: np.ndarray,
    finite: bool,
) -> str | None:
    """Why one chain is frozen, or None: its tuned step size fell below
    :data:`FROZEN_STEP_RATIO` times its start (or is not finite), its preconditioner holds a
    variance that is not positive and finite, its draws are not all finite, or its kept
    positions (draw, d) never left the tuned one ``tuned`` (d,)."""
    if not np.isfinite(step_size) or step_size < FROZEN_STEP_RATIO * start_step_size:
        return f"its tuned step size fell to {step_size:.3g} from {start_step_size:g}"
    if not np.all(np.isfinite(inverse_mass) & (inverse_mass > 0)):
        return "the tuned preconditioner has a variance that is zero or not finite"
    if not finite:
        return "its draws are not finite"
    if np.all(positions == tuned):
        return "its draws do not move"
    return None


class _Runner:
    """Tunes and samples chains with the compiled programs, timing each phase apart from the
    compilation it triggers."""

    def __init__(
        self,
        target: Target,
        options: Any,
        density: FlatDensity,
        clock: CompileClock,
        dynamics: Dynamics = UNADJUSTED,
    ) -> None:
        self.spec, self.options, self.density, self.clock = target.spec, options, density, clock
        self.dynamics = dynamics
        self.data = (target.x, target.y)
        self.tune_fn, self.sample_fn = dynamics.programs(density, options)
        self.seconds = {"compile": 0.0, "warmup": 0.0, "sampling": 0.0}

    def _timed(self, phase: str, run: Callable[[], Any]) -> Any:
        start = now()
        out = jax.block_until_ready(run())
        end = now()
        compile_s = self.clock.compile_seconds(start, end)
        self.seconds["compile"] += compile_s
        self.seconds[phase] += end - start - compile_s
        return out

    def _call(self, phase: str, name: str, fn: Callable, *args: Any) -> Any:
        """``fn(*args, data)`` compiled once per process for these options and shapes."""
        o = self.options
        sizes = self.dynamics.sizes(o)
        key = (self.dynamics.name, name, self.spec, *sizes, o.num_samples, o.thinning)
        return self._timed(phase, lambda: compiled(key, fn, *args, self.data)(*args, self.data))

    def tune(self, starts: Any, keys: Any, step_size: float) -> tuple[Any, Any]:
        """Per chain, the tuned state and ``MCLMCAdaptationState``."""
        step_sizes = jnp.full((starts.shape[0],), step_size, jnp.float32)
        return self._call("warmup", "tune", self.tune_fn, starts, keys, step_sizes)

    def sample(self, state: Any, params: Any, keys: Any) -> dict[str, Any]:
        """Per chain and kept draw: position, log density, divergence and the dynamics' own
        stats."""
        return self._call("sampling", "sample", self.sample_fn, state, params, keys)

    def constrain(self, positions: Any) -> dict[str, np.ndarray]:
        """Site values (chain, draw, *site_shape) of flat positions (chain, draw, d)."""
        fn = jax.vmap(jax.vmap(self.density.constrained))
        theta = self._timed(
            "sampling",
            lambda: compiled(("mclmc", "constrain", self.spec), fn, positions)(positions),
        )
        return {site: np.asarray(v) for site, v in theta.items()}

    def attempt(
        self, starts: Any, step_size: float, tune_keys: Any, sample_keys: Any
    ) -> tuple[_Chains, list[str | None]]:
        """Tune and sample the chains started at ``starts`` (chain, d); the chains and why
        each is frozen (None: it is not)."""
        state, params = self.tune(starts, tune_keys, step_size)
        kept = self.sample(state, params, sample_keys)
        positions = kept.pop("position")
        draws = self.constrain(positions)
        reasons = _reasons(step_size, params, state, positions, draws)
        step_sizes = np.asarray(params.step_size)
        stats = {stat: np.asarray(values) for stat, values in kept.items()}
        stats["step_size"] = np.repeat(step_sizes[:, None], stats["lp"].shape[1], axis=1)
        summary = self.dynamics.summary(stats, self.density.dim)
        return _Chains(draws, stats, step_sizes, np.asarray(params.L), summary), reasons


def _reasons(
    start_step_size: float, params: Any, state: Any, positions: Any, draws: dict[str, np.ndarray]
) -> list[str | None]:
    """:func:`frozen_reason` of each chain, from its tuned ``params`` and ``state``."""
    step_sizes, inverse_mass = np.asarray(params.step_size), np.asarray(params.inverse_mass_matrix)
    tuned = np.asarray(state.position)
    positions = np.asarray(positions)
    num_chains = len(tuned)
    finite = np.all([np.isfinite(v).reshape(num_chains, -1).all(1) for v in draws.values()], 0)
    return [
        frozen_reason(
            start_step_size, step_sizes[c], inverse_mass[c], tuned[c], positions[c], finite[c]
        )
        for c in range(num_chains)
    ]


def _keys(seed: int, purpose: str, num_chains: int) -> jax.Array:
    """One key per chain, the same for chain ``c`` whichever chains run."""
    return jax.random.split(jax.random.PRNGKey(child_seed(seed, purpose)), num_chains)


def _replace_chains(chains: _Chains, rows: np.ndarray, new: _Chains) -> _Chains:
    """``chains`` with the chains ``rows`` replaced by ``new``'s."""

    def put(old: np.ndarray, values: np.ndarray) -> np.ndarray:
        out = old.copy()
        out[rows] = values
        return out

    return jax.tree.map(put, chains, new)


def _all_frozen(name: str, target: Target, options: Any) -> DivergedError:
    return diverged(
        name,
        "the step-size tuner froze every chain (its step size fell to zero, or the chain's "
        f"draws did not move or were not finite), also when retuned from a {RETUNE_FACTOR:g} "
        "times smaller start",
        target.model,
        step_option=("step_size", options.step_size),
        context=(
            "(try a longer warm-up, num_warmup)"
            if options.init == "ensemble"
            else "(try init='ensemble' too: chains started at posterior modes)"
        ),
    )


def _tune_and_sample(
    name: str, target: Target, options: Any, seed: int, runner: _Runner, starts: Any
) -> tuple[_Chains, dict[str, Any]]:
    """Every chain tuned and sampled, a frozen one once more from a smaller start; the chains
    kept and what froze (``frozen_chains``, ``dropped_chains``)."""
    n = starts.shape[0]
    kind = runner.dynamics.name
    step_size = runner.dynamics.start_step(options, runner.density.dim)
    chains, reasons = runner.attempt(
        starts, step_size, _keys(seed, f"{kind}_tune", n), _keys(seed, f"{kind}_sample", n)
    )
    frozen = [c for c, why in enumerate(reasons) if why is not None]
    dropped: list[dict[str, Any]] = []
    if frozen:
        for c in frozen:
            logger.warning("%s: chain %d froze (%s); retuning it", name, c, reasons[c])
        rows = np.asarray(frozen)
        retuned, again = runner.attempt(
            starts[rows], step_size / RETUNE_FACTOR,
            _keys(seed, f"{kind}_retune", n)[rows], _keys(seed, f"{kind}_resample", n)[rows],
        )  # fmt: skip
        chains = _replace_chains(chains, rows, retuned)
        dropped = [{"chain": c, "reason": why} for c, why in zip(frozen, again, strict=True) if why]
        for entry in dropped:
            logger.warning("%s: dropping chain %d: %s", name, entry["chain"], entry["reason"])
    kept = np.asarray([c for c in range(n) if c not in {d["chain"] for d in dropped}], int)
    if kept.size == 0:
        raise _all_frozen(name, target, options)
    info = {"frozen_chains": frozen, "dropped_chains": dropped}
    return jax.tree.map(lambda a: a[kept], chains), info


def run(name: str, target: Target, options: MCLMCOptions, seed: int) -> RunOutput:
    """Tune and run MCLMC on every chain at once, from the starts ``options.init`` says."""
    return run_chains(name, target, options, seed, UNADJUSTED)


def run_chains(name: str, target: Target, options: Any, seed: int, dynamics: Dynamics) -> RunOutput:
    """Tune and run ``dynamics`` on every chain at once, from the starts ``options.init`` says
    (options with ``num_chains``, ``num_samples``, ``thinning``, ``step_size`` and ``init``)."""
    density = flat_density(target.spec)
    starts, start_info = _starts(name, target, options, seed, density)
    with CompileClock() as clock:
        runner = _Runner(target, options, density, clock, dynamics)
        chains, frozen_info = _tune_and_sample(name, target, options, seed, runner, starts)
    timings = dict(runner.seconds)
    warmup, compile_s = start_seconds(start_info)
    timings["warmup"] += warmup
    timings["compile"] += compile_s
    info = {
        "chain_method": "vectorized",
        "step_size": chains.step_size.astype(float).tolist(),
        "L": chains.L.astype(float).tolist(),
        **{key: values.astype(float).tolist() for key, values in chains.summary.items()},
        **frozen_info,
        **start_info,
    }
    return RunOutput(draws=chains.draws, timings=timings, sample_stats=chains.stats, info=info)
