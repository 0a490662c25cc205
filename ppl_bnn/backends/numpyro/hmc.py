"""The ``hmc`` driver on NumPyro: ``nuts`` and ``hmc`` by NumPyro's ``MCMC`` (see
:mod:`ppl_bnn.methods.hamiltonian`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import HMC, MCMC, NUTS, init_to_uniform

from ppl_bnn.backends.numpyro import ops
from ppl_bnn.backends.numpyro.starts import ensemble_starts, start_seconds
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.hamiltonian import MCMCOptions, no_finite_start, tree_depth
from ppl_bnn.methods.nuts import NUTSOptions
from ppl_bnn.model.program import site_transforms
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import CompileClock, now


def _kernel(program: Callable, options: MCMCOptions) -> Any:
    common = {
        "step_size": options.step_size,
        "target_accept_prob": options.target_accept,
        "dense_mass": options.dense_mass,
        "init_strategy": init_to_uniform,
    }
    if isinstance(options, NUTSOptions):
        return NUTS(program, max_tree_depth=options.max_tree_depth, **common)
    return HMC(program, **options.length(), **common)


_NUMPYRO_FIELDS = {
    "num_steps": "n_steps",
    "accept_prob": "acceptance_rate",
    "adapt_state.step_size": "step_size",
    "energy": "energy",
    "potential_energy": "lp",
}


def _chain_method(options: MCMCOptions, num_chains: int) -> str:
    """``options.chain_method``; ``"auto"``: in parallel where JAX has a host device per chain,
    else one chain after another."""
    if options.chain_method != "auto":
        return options.chain_method
    return "parallel" if 1 < num_chains <= jax.local_device_count() else "sequential"


def _starts(
    name: str, target: Target, options: MCMCOptions, seed: int
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The chains' unconstrained starting values (None: NumPyro's own start) and what making
    them cost and gave (see :mod:`ppl_bnn.methods.starts`)."""
    if options.init != "ensemble":
        return None, {}
    starts, info = ensemble_starts(name, target, options.num_chains, seed)
    transforms = site_transforms(target.spec, ops.PPL_NUMPYRO)
    unconstrained = {site: transforms[site].inv(jnp.asarray(v)) for site, v in starts.items()}
    if info["num_starts"] == 1:  # one chain: NumPyro takes its values without a chain axis
        unconstrained = {site: v[0] for site, v in unconstrained.items()}
    return unconstrained, info


def run(name: str, target: Target, options: MCMCOptions, seed: int) -> RunOutput:
    """NumPyro's ``MCMC`` with its NUTS or HMC kernel, chains started where ``options.init``
    says and run as ``options.chain_method`` says."""
    x, y = target.x, target.y
    init_params, start_info = _starts(name, target, options, seed)
    num_chains = start_info.get("num_starts", options.num_chains)
    chain_method = _chain_method(options, num_chains)
    mcmc = MCMC(
        _kernel(target.program, options),
        num_warmup=options.num_warmup,
        num_samples=options.num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=False,
    )
    fields = tuple(_NUMPYRO_FIELDS)
    key_warmup = jax.random.PRNGKey(child_seed(seed, "mcmc_warmup"))
    key_sample = jax.random.PRNGKey(child_seed(seed, "mcmc_sample"))
    with CompileClock() as clock, ops.no_valid_start_as(lambda: no_finite_start(name, target)):
        start = now()
        if options.num_warmup > 0:
            mcmc.warmup(key_warmup, x, y, extra_fields=fields, init_params=init_params)
            jax.block_until_ready(mcmc.post_warmup_state)
            init_params = None  # the run goes on from the warmed-up state
        warm = now()
        mcmc.run(key_sample, x, y, extra_fields=fields, init_params=init_params)
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
    start_warmup, start_compile = start_seconds(start_info)
    timings = {
        "compile": compile_warm + compile_run + start_compile,
        "warmup": (warm - start) - compile_warm + start_warmup,
        "sampling": (end - warm) - compile_run,
    }
    info = {"chain_method": chain_method, "host_devices": jax.local_device_count(), **start_info}
    draws = {k: np.asarray(v) for k, v in samples.items()}
    return RunOutput(draws=draws, timings=timings, sample_stats=stats, info=info)
