"""The ``sgmcmc`` driver on Pyro: an SG-MCMC kernel in a torch loop on the flat potential
(see :mod:`ppl_bnn.methods.sgmcmc`)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from ppl_bnn.backends.pyro.device import generator as seeded_generator
from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.backends.pyro.potential import FlatPotential
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.divergence import nonfinite_sites
from ppl_bnn.methods.sgmcmc import (
    SGMCMCOptions,
    batch_schedules,
    completed_blocks,
    finish,
    site_arrays,
)
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


def run(name: str, target: Target, options: SGMCMCOptions, seed: int) -> RunOutput:
    """Run ``options.kernel()`` on Pyro: a Python loop per chain, its own ``torch.Generator``.

    The chain moves one flat vector of unconstrained parameters on the Pyro model's flat
    potential (:class:`~ppl_bnn.backends.pyro.potential.FlatPotential`, traced unless
    ``jit=False``); the updates are elementwise, so a flat position takes the steps that one
    array per site would, at a fraction of the per-step cost.
    """
    spec = target.spec
    n = target.num_data
    options = options.for_data(n)
    batch = options.resolved_batch_size(n)
    init, step = options.kernel()
    starts = options.initial_positions(target.model, seed, name)
    start = now()
    potential = FlatPotential(
        spec, target.x[:batch], target.y[:batch], likelihood_scale=n / batch,
        mode="traced" if options.jit else "eager",
    )  # fmt: skip
    timings = {"compile": now() - start, "warmup": 0.0, "sampling": 0.0}
    schedules = batch_schedules(n, batch, options, seed, name)
    flat_per_chain, stats_per_chain, diverged_at, bad_sites = [], [], [], set()
    for chain, position in enumerate(starts):
        batches = None if schedules is None else torch.as_tensor(schedules[chain]).long()
        generator = seeded_generator(child_seed(seed, f"{name}_chain{chain}"))
        state = init({"z": torch.as_tensor(potential.layout.flatten(position))})
        done = _run_chain(potential, state, step, batches, generator, options, target)
        timings["warmup"] += done.warmup_s
        timings["sampling"] += done.sampling_s
        diverged_at.append(done.diverged_at)
        bad_sites.update(done.bad_sites)
        flat_per_chain.append(done.kept)
        stats_per_chain.append(done.stats)
    length = int(completed_blocks(np.asarray(diverged_at), options).min())
    flat = np.stack(
        [np.asarray(z[:length], dtype=np.float32).reshape(length, potential.size)
         for z in flat_per_chain]
    )  # fmt: skip
    # No block at all only when a chain diverged at once, which finish reports as an error.
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
    sites = [site.name for site in spec.sites() if site.name in bad_sites]
    return finish(
        name, target, draws, stats, np.asarray(diverged_at), sites, options, timings, info
    )


class _Chain(NamedTuple):
    """One chain's run: its kept flat positions with their step sizes and log densities, the
    step it diverged at (-1: none), the sites that were not finite there, and its seconds."""

    kept: list[np.ndarray]
    stats: dict[str, list[float]]
    diverged_at: int
    bad_sites: list[str]
    warmup_s: float
    sampling_s: float


def _run_chain(
    potential: FlatPotential,
    state: Any,
    step: Any,
    batches: torch.Tensor | None,
    generator: torch.Generator,
    options: SGMCMCOptions,
    target: Target,
) -> _Chain:
    """One chain from ``state``, step by step on the batches of ``batches`` (None: all data)."""
    x, y = target.x, target.y
    kept_z, chain_stats = [], {"step_size": [], "lp": []}
    diverged, warm, bad_sites = -1, None, []
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
                torch.isfinite(v).all() for v in site_arrays(new)
            )
        if not finite:
            diverged = t
            bad_sites = nonfinite_sites(potential.layout.unflatten(new.position["z"]), target.model)
            break
        state = new
        kept_step = t - options.num_burnin + 1
        if kept_step > 0 and kept_step % options.thinning == 0:
            kept_z.append(to_numpy(state.position["z"]).copy())
            chain_stats["step_size"].append(float(info.step_size))
            chain_stats["lp"].append(float(info.log_density))
    end = now()
    warm = end if warm is None else warm
    return _Chain(kept_z, chain_stats, diverged, bad_sites, warm - start, end - warm)
