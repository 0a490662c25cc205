"""The ``hmc`` driver on Pyro: ``nuts`` and ``hmc`` by Pyro's ``MCMC`` on a potential built once
(see :mod:`ppl_bnn.methods.hamiltonian` and :mod:`ppl_bnn.backends.pyro.potential`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from pyro.infer import HMC, MCMC, NUTS
from pyro.infer.mcmc.util import initialize_model
from pyro.ops.integrator import potential_grad

from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.backends.pyro.potential import FlatPotential
from ppl_bnn.backends.pyro.rng import seeded_torch
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.hamiltonian import MCMCOptions, no_finite_start, tree_depth
from ppl_bnn.methods.nuts import NUTSOptions
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now

#: Attempts at a finite starting point, as Pyro's ``initialize_model`` makes.
_INIT_ATTEMPTS = 100


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
        # the per-draw value is recovered from consecutive means, up to their rounding, which
        # can carry it just past 0 or 1 (1 + 7e-15 was seen): clipped back to a probability.
        mean_accept = float(kernel._mean_accept_prob)
        accept = n * mean_accept - (n - 1) * self.mean_accept_prev
        self.stats["acceptance_rate"].append(min(max(accept, 0.0), 1.0))
        self.mean_accept_prev = mean_accept
        self.stats["n_steps"].append(steps)
        self.stats["step_size"].append(float(kernel.step_size))
        self.stats["lp"].append(-float(kernel._potential_energy_last.detach()))
        # Pyro lists divergent sampling iterations by index (0-based) as they happen.
        self.stats["diverging"].append(
            bool(kernel._divergences) and kernel._divergences[-1] == n - 1
        )


def _kernel(potential_fn: Callable, options: MCMCOptions) -> Any:
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


class _ChainTarget:
    """What a Pyro chain samples: a potential over ``{site: tensor}``, a start, and the way back
    from the sampler's values to constrained site draws."""

    def __init__(self, name: str, target: Target, options: MCMCOptions) -> None:
        self.name, self.target = name, target
        self.options = options
        self.x, self.y = target.x, target.y
        self.program = target.program
        self.flat = None
        self.mode = options.potential
        if options.potential not in ("pyro", "pyro_jit"):
            self.flat = FlatPotential(target.spec, self.x, self.y, mode=options.potential)
            self.mode = self.flat.mode

    def start(self) -> tuple[dict, Callable, dict]:
        """``(initial_params, potential_fn, transforms)`` for one chain, from torch's generator."""
        if self.flat is None:
            try:
                init, potential_fn, transforms, _ = initialize_model(
                    self.program,
                    model_args=(self.x, self.y),
                    jit_compile=self.options.potential == "pyro_jit",
                    skip_jit_warnings=True,
                )
            except (RuntimeError, ValueError) as err:  # "cannot find valid initial params"
                if "valid initial params" not in str(err):
                    raise
                raise no_finite_start(self.name, self.target) from err
            return init, potential_fn, transforms
        flat = self.flat
        for _ in range(_INIT_ATTEMPTS):  # uniform(-2, 2) in unconstrained space, as NumPyro's
            z = torch.rand(flat.size) * 4 - 2  # and Pyro's default init_to_uniform
            with torch.no_grad():
                if torch.isfinite(flat.energy(z, self.x, self.y)):
                    return {"z": z}, lambda params: flat(params["z"]), {}
        raise no_finite_start(self.name, self.target)

    def draws(self, samples: dict) -> dict[str, np.ndarray]:
        """Constrained draws per site from the sampler's samples."""
        if self.flat is None:
            return {k: to_numpy(v) for k, v in samples.items()}
        return self.flat.constrained(to_numpy(samples["z"]))


def _run_chain(target: _ChainTarget, options: MCMCOptions) -> tuple[dict, dict, dict]:
    """One Pyro chain: ``(draws, sample_stats, timings)``."""
    start = now()
    init_params, potential_fn, transforms = target.start()
    potential = _CountingPotential(potential_fn)
    potential_grad(potential, init_params)  # traces (with pyro_jit) the potential
    potential.calls = 0
    recorder = _PyroRecorder(potential)
    mcmc = MCMC(
        _kernel(potential, options),
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


def run(name: str, target: Target, options: MCMCOptions, seed: int) -> RunOutput:
    """Pyro's ``MCMC`` with its NUTS or HMC kernel on the chosen potential; chains in sequence."""
    start = now()
    chain_target = _ChainTarget(name, target, options)
    build = now() - start
    chains = []
    for chain in range(options.num_chains):
        with seeded_torch(child_seed(seed, f"mcmc_chain{chain}")):
            chains.append(_run_chain(chain_target, options))
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
        "pyro_mode": chain_target.mode,
        "torch_threads": torch.get_num_threads(),
    }
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)
