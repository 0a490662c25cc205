r"""Hamiltonian Monte Carlo: ``nuts`` (No-U-Turn, Hoffman & Gelman 2014) and ``hmc`` (Neal 2011).

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
(:mod:`ppl_bnn.backends.pyro_potential`); ``potential="pyro"`` / ``"pyro_jit"`` use Pyro's own
per-site potential from ``initialize_model`` (eager, or with ``jit_compile``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppl_bnn.methods.common import (
    RunOutput,
    check_positive_float,
    check_positive_int,
    check_probability,
    seeded_torch,
)
from ppl_bnn.model import BNN
from ppl_bnn.registry import register
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import CompileClock, now

#: Pyro potentials: flat-vector ones (see :mod:`ppl_bnn.backends.pyro_potential`), then Pyro's own.
PYRO_POTENTIALS: tuple[str, ...] = ("compiled", "traced", "eager", "pyro_jit", "pyro")
#: Attempts at a finite starting point, as Pyro's ``initialize_model`` makes.
_INIT_ATTEMPTS = 100


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
    """

    num_warmup: int = 500
    num_samples: int = 500
    num_chains: int = 1
    target_accept: float = 0.8
    step_size: float = 1.0
    dense_mass: bool = False
    potential: str = "compiled"

    def __post_init__(self) -> None:
        check_positive_int("num_warmup", self.num_warmup, minimum=0)
        check_positive_int("num_samples", self.num_samples)
        check_positive_int("num_chains", self.num_chains)
        check_probability("target_accept", self.target_accept)
        check_positive_float("step_size", self.step_size)
        if not isinstance(self.dense_mass, bool):
            raise ValueError(f"dense_mass must be True or False, got {self.dense_mass!r}")
        if self.potential not in PYRO_POTENTIALS:
            raise ValueError(
                f"unknown potential {self.potential!r}; available: {', '.join(PYRO_POTENTIALS)}"
            )


@dataclass(frozen=True, kw_only=True)
class NUTSOptions(MCMCOptions):
    """Options of ``fit(..., method="nuts")``.

    Attributes:
        max_tree_depth: Caps one draw at ``2**max_tree_depth - 1`` leapfrog steps.
    """

    max_tree_depth: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("max_tree_depth", self.max_tree_depth)


@dataclass(frozen=True, kw_only=True)
class HMCOptions(MCMCOptions):
    """Options of ``fit(..., method="hmc")``.

    Attributes:
        trajectory_length: Integration time per draw (``num_steps = ceil(length / step_size)``).
        num_steps: Fixed leapfrog steps per draw; overrides ``trajectory_length`` when set.
    """

    trajectory_length: float = 2 * math.pi
    num_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_float("trajectory_length", self.trajectory_length)
        if self.num_steps is not None:
            check_positive_int("num_steps", self.num_steps)


def _hmc_length(options: HMCOptions) -> dict[str, Any]:
    """A fixed ``num_steps`` replaces the trajectory length (both libraries' convention)."""
    if options.num_steps is not None:
        return {"num_steps": options.num_steps, "trajectory_length": None}
    return {"num_steps": None, "trajectory_length": options.trajectory_length}


def tree_depth(num_steps: np.ndarray) -> np.ndarray:
    """NUTS tree depth from leapfrog steps per draw (the convention ArviZ uses)."""
    return (np.floor(np.log2(np.maximum(num_steps, 1))) + 1).astype(np.int64)


def _numpyro_kernel(program: Callable, options: MCMCOptions) -> Any:
    from numpyro.infer import HMC, NUTS, init_to_uniform

    common = {
        "step_size": options.step_size,
        "target_accept_prob": options.target_accept,
        "dense_mass": options.dense_mass,
        "init_strategy": init_to_uniform,
    }
    if isinstance(options, NUTSOptions):
        return NUTS(program, max_tree_depth=options.max_tree_depth, **common)
    return HMC(program, **_hmc_length(options), **common)


_NUMPYRO_FIELDS = {
    "num_steps": "n_steps",
    "accept_prob": "acceptance_rate",
    "adapt_state.step_size": "step_size",
    "energy": "energy",
    "potential_energy": "lp",
}


def run_numpyro(model: BNN, options: MCMCOptions, seed: int) -> RunOutput:
    import jax
    from numpyro.infer import MCMC

    from ppl_bnn.backends import numpyro_backend as backend

    x, y = backend.data(model.spec, model.x, model.y)
    parallel = 1 < options.num_chains <= jax.local_device_count()
    chain_method = "parallel" if parallel else "sequential"
    mcmc = MCMC(
        _numpyro_kernel(backend.model(model.spec), options),
        num_warmup=options.num_warmup,
        num_samples=options.num_samples,
        num_chains=options.num_chains,
        chain_method=chain_method,
        progress_bar=False,
    )
    fields = tuple(_NUMPYRO_FIELDS)
    key_warmup = jax.random.PRNGKey(child_seed(seed, "mcmc_warmup"))
    key_sample = jax.random.PRNGKey(child_seed(seed, "mcmc_sample"))
    with CompileClock() as clock:
        start = now()
        if options.num_warmup > 0:
            mcmc.warmup(key_warmup, x, y, extra_fields=fields)
            jax.block_until_ready(mcmc.post_warmup_state)
        warm = now()
        mcmc.run(key_sample, x, y, extra_fields=fields)
        samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        end = now()
    extra = mcmc.get_extra_fields(group_by_chain=True)
    stats = {name: np.asarray(extra[field]) for field, name in _NUMPYRO_FIELDS.items()}
    stats["lp"] = -stats["lp"]
    stats["diverging"] = np.asarray(extra["diverging"])
    if isinstance(options, NUTSOptions):
        stats["tree_depth"] = tree_depth(stats["n_steps"])
    compile_warm = clock.compile_seconds(start, warm)
    compile_run = clock.compile_seconds(warm, end)
    timings = {
        "compile": compile_warm + compile_run,
        "warmup": (warm - start) - compile_warm,
        "sampling": (end - warm) - compile_run,
    }
    info = {"chain_method": chain_method, "host_devices": jax.local_device_count()}
    draws = {k: np.asarray(v) for k, v in samples.items()}
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)


class _CountingPotential:
    """Wraps a potential and counts its evaluations (one per leapfrog gradient)."""

    def __init__(self, potential_fn: Callable) -> None:
        self.potential_fn = potential_fn
        self.calls = 0

    def __call__(self, params: dict) -> Any:
        self.calls += 1
        return self.potential_fn(params)


class _PyroRecorder:
    """``hook_fn`` for Pyro's ``MCMC``: the end of warmup and per-draw sampler statistics."""

    def __init__(self, potential: _CountingPotential) -> None:
        self.potential = potential
        self.warmup_end: float | None = None
        self.calls_seen = 0
        self.mean_accept_prev = 0.0
        self.stats: dict[str, list[float]] = {
            "n_steps": [],
            "step_size": [],
            "acceptance_rate": [],
            "lp": [],
            "diverging": [],
        }

    def __call__(self, kernel: Any, params: Any, stage: str, i: int) -> None:
        steps = self.potential.calls - self.calls_seen
        self.calls_seen = self.potential.calls
        if stage == "Warmup":
            self.warmup_end = now()
            return
        n = len(self.stats["n_steps"]) + 1
        # Pyro keeps only a running mean of the acceptance probability over the sampling phase;
        # the per-draw value is recovered exactly from consecutive means.
        mean_accept = float(kernel._mean_accept_prob)
        self.stats["acceptance_rate"].append(n * mean_accept - (n - 1) * self.mean_accept_prev)
        self.mean_accept_prev = mean_accept
        self.stats["n_steps"].append(steps)
        self.stats["step_size"].append(float(kernel.step_size))
        self.stats["lp"].append(-float(kernel._potential_energy_last.detach()))
        # Pyro lists divergent sampling iterations by index (0-based) as they happen.
        self.stats["diverging"].append(
            bool(kernel._divergences) and kernel._divergences[-1] == n - 1
        )


def _pyro_kernel(potential_fn: Callable, options: MCMCOptions) -> Any:
    from pyro.infer import HMC, NUTS

    common = {
        "potential_fn": potential_fn,
        "step_size": options.step_size,
        "target_accept_prob": options.target_accept,
        "full_mass": options.dense_mass,
    }
    if isinstance(options, NUTSOptions):
        return NUTS(max_tree_depth=options.max_tree_depth, **common)
    if options.num_steps is None:
        return HMC(trajectory_length=options.trajectory_length, **common)

    class FixedStepsHMC(HMC):
        """Pyro's HMC turns ``num_steps`` into a trajectory length and recomputes the number of
        steps as the step size adapts; this keeps ``num_steps`` leapfrog steps per draw, as
        NumPyro's HMC does, so the option means the same on both backends."""

        @property
        def num_steps(self) -> int:
            return options.num_steps

    return FixedStepsHMC(num_steps=options.num_steps, **common)


class _PyroTarget:
    """What a Pyro chain samples: a potential over ``{site: tensor}``, a start, and the way back
    from the sampler's values to constrained site draws."""

    def __init__(self, model: BNN, options: MCMCOptions) -> None:
        from ppl_bnn.backends import pyro_backend as backend

        self.options = options
        self.x, self.y = backend.data(model.spec, model.x, model.y)
        self.program = backend.model(model.spec)
        self.flat = None
        self.mode = options.potential
        if options.potential not in ("pyro", "pyro_jit"):
            from ppl_bnn.backends.pyro_potential import FlatPotential

            self.flat = FlatPotential(model.spec, self.x, self.y, mode=options.potential)
            self.mode = self.flat.mode

    def start(self) -> tuple[dict, Callable, dict]:
        """``(initial_params, potential_fn, transforms)`` for one chain, from torch's generator."""
        import torch
        from pyro.infer.mcmc.util import initialize_model

        if self.flat is None:
            init, potential_fn, transforms, _ = initialize_model(
                self.program,
                model_args=(self.x, self.y),
                jit_compile=self.options.potential == "pyro_jit",
                skip_jit_warnings=True,
            )
            return init, potential_fn, transforms
        flat = self.flat
        for _ in range(_INIT_ATTEMPTS):  # uniform(-2, 2) in unconstrained space, as NumPyro's
            z = torch.rand(flat.size) * 4 - 2  # and Pyro's default init_to_uniform
            with torch.no_grad():
                if torch.isfinite(flat.energy(z, self.x, self.y)):
                    return {"z": z}, lambda params: flat(params["z"]), {}
        raise RuntimeError(f"no finite potential at {_INIT_ATTEMPTS} random starting points")

    def draws(self, samples: dict) -> dict[str, np.ndarray]:
        """Constrained draws per site from the sampler's samples."""
        if self.flat is None:
            return {k: v.detach().numpy() for k, v in samples.items()}
        return self.flat.constrained(samples["z"].detach().numpy())


def _run_pyro_chain(target: _PyroTarget, options: MCMCOptions) -> tuple[dict, dict, dict]:
    """One Pyro chain: ``(draws, sample_stats, timings)``."""
    from pyro.infer import MCMC
    from pyro.ops.integrator import potential_grad

    start = now()
    init_params, potential_fn, transforms = target.start()
    potential = _CountingPotential(potential_fn)
    potential_grad(potential, init_params)  # traces (with pyro_jit) the potential
    potential.calls = 0
    recorder = _PyroRecorder(potential)
    mcmc = MCMC(
        _pyro_kernel(potential, options),
        num_samples=options.num_samples,
        warmup_steps=options.num_warmup,
        initial_params=init_params,
        transforms=transforms,
        hook_fn=recorder,
        disable_progbar=True,
    )
    run_start = now()
    mcmc.run()
    end = now()
    warm = recorder.warmup_end if recorder.warmup_end is not None else run_start
    stats = {k: np.asarray(v) for k, v in recorder.stats.items()}
    timings = {"compile": run_start - start, "warmup": warm - run_start, "sampling": end - warm}
    return target.draws(mcmc.get_samples()), stats, timings


def run_pyro(model: BNN, options: MCMCOptions, seed: int) -> RunOutput:
    import torch

    start = now()
    target = _PyroTarget(model, options)
    build = now() - start
    chains = []
    for chain in range(options.num_chains):
        with seeded_torch(child_seed(seed, f"mcmc_chain{chain}")):
            chains.append(_run_pyro_chain(target, options))
    draws, stats, timings = (
        {k: np.stack([part[k] for part in parts]) for k in parts[0]}
        for parts in zip(*chains, strict=True)
    )
    timings = {phase: float(seconds.sum()) for phase, seconds in timings.items()}
    timings["compile"] += build
    if isinstance(options, NUTSOptions):
        stats["tree_depth"] = tree_depth(stats["n_steps"])
    info = {
        "chain_method": "sequential",
        "pyro_mode": target.mode,
        "torch_threads": torch.get_num_threads(),
    }
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)


register("nuts", NUTSOptions, {"numpyro": run_numpyro, "pyro": run_pyro})
register("hmc", HMCOptions, {"numpyro": run_numpyro, "pyro": run_pyro})
