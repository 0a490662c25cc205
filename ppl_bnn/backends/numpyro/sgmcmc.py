"""The ``sgmcmc`` driver on NumPyro: an SG-MCMC kernel under ``lax.scan``, chains vectorised
(see :mod:`ppl_bnn.methods.sgmcmc`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ppl_bnn.backends.numpyro import ops
from ppl_bnn.backends.numpyro.programs import compiled
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.sgmcmc import (
    SGMCMCOptions,
    batch_schedules,
    finish,
    site_arrays,
    site_fields,
)
from ppl_bnn.model.program import constrain, numberless, site_transforms
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


def _gradient(target: Target, batch: int) -> tuple[Callable[..., Any], dict]:
    """``value_and_grad(z, xb, yb, numbers)`` of the minibatch log density (the likelihood
    scaled by ``n / batch``) on the unconstrained positions ``z``, given the model's numbers,
    and the sites' transforms."""
    n = target.num_data
    log_joint = ops.log_joint(target.spec)
    transforms = site_transforms(target.spec, ops.PPL_NUMPYRO)

    def log_density(z, xb, yb, numbers):
        theta, log_det = constrain(transforms, z)
        return log_joint(theta, xb, yb, n / batch, numbers) + log_det

    return jax.value_and_grad(log_density), transforms


def _update(value_and_grad: Callable[..., Any], options: SGMCMCOptions, names: list[str]):
    """One kernel step of one chain, pure: ``(carry, (key, idx), data) -> (carry, info)``, the
    carry ``(state, the step it diverged at (-1: none), from that step which sites' positions
    were not finite)``, ``data`` the arguments ``(x, y, model numbers, step size)``; a step to
    a non-finite position or log density is not taken."""

    def one_step(carry, inputs, data):
        state, diverged_at, bad_sites = carry
        key, idx = inputs
        x, y, numbers, step_size = data
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        _, step = options.kernel(cos=jnp.cos, step_size=step_size)
        lp, grad = value_and_grad(state.position, xb, yb, numbers)
        leaves, tree = jax.tree.flatten(state.position)
        keys = jax.random.split(key, len(leaves))
        noise = jax.tree.unflatten(
            tree,
            [jax.random.normal(k, v.shape, v.dtype) for k, v in zip(keys, leaves, strict=True)],
        )
        new, info = step(state, lp, grad, noise)
        finite = jnp.isfinite(lp) & jnp.all(
            jnp.array([jnp.all(jnp.isfinite(v)) for v in site_arrays(new)])
        )
        alive = diverged_at < 0
        ok = finite & alive
        first = alive & ~finite
        nonfinite = jnp.stack([~jnp.all(jnp.isfinite(new.position[k])) for k in names])
        bad_sites = jnp.where(first, nonfinite, bad_sites)

        def keep_finite(a, b):
            return jnp.where(ok, a, b)

        fields = {
            f: jax.tree.map(keep_finite, getattr(new, f), getattr(state, f))
            for f in site_fields(new)
        }
        diverged_at = jnp.where(first, state.step, diverged_at)
        return (new._replace(**fields), diverged_at, bad_sites), info

    return one_step


def _phases(one_step: Callable[..., Any], options: SGMCMCOptions, transforms: dict):
    """``(burn, sample)`` of one chain: ``burn(carry, key, idx, data) -> carry`` over the
    burn-in steps, ``sample(carry, key, idx, data) -> (carry, (theta, info))`` keeping every
    ``thinning``-th position, constrained. The data are arguments, not constants."""

    def burn(carry, key, idx, data):
        keys = jax.random.split(key, options.num_burnin)
        carry, _ = lax.scan(lambda c, i: one_step(c, i, data), carry, (keys, idx))
        return carry

    def draw(carry, inputs, data):
        key, idx = inputs
        keys = jax.random.split(key, options.thinning)
        carry, infos = lax.scan(lambda c, i: one_step(c, i, data), carry, (keys, idx))
        theta, _ = constrain(transforms, carry[0].position)
        return carry, (theta, jax.tree.map(lambda v: v[-1], infos))

    def sample(carry, key, idx, data):
        keys = jax.random.split(key, options.num_blocks)
        return lax.scan(lambda c, i: draw(c, i, data), carry, (keys, idx))

    return burn, sample


def _start(init, target: Target, options: SGMCMCOptions, seed: int, name: str, names: list):
    """Every chain's first carry: the kernel's state at its start, no divergence."""
    chains = options.num_chains
    starts = options.initial_positions(target.model, seed, name)
    position = {k: jnp.stack([jnp.asarray(s[k]) for s in starts]) for k in starts[0]}
    state = jax.vmap(init)(position)._replace(step=jnp.zeros((chains,), jnp.int32))
    return (
        state,
        jnp.full((chains,), -1, dtype=jnp.int32),
        jnp.zeros((chains, len(names)), dtype=bool),
    )


def _minibatches(target: Target, options: SGMCMCOptions, batch: int, seed: int, name: str):
    """Each chain's minibatch indices for burn-in (chains, steps, batch) and for sampling
    (chains, blocks, thinning, batch), or ``(None, None)`` for full batches."""
    schedules = batch_schedules(target.num_data, batch, options, seed, name)
    if schedules is None:
        return None, None
    shape = (options.num_chains, options.num_blocks, options.thinning, batch)
    burn = jnp.asarray(schedules[:, : options.num_burnin])
    return burn, jnp.asarray(schedules[:, options.num_burnin :].reshape(shape))


def run(name: str, target: Target, options: SGMCMCOptions, seed: int) -> RunOutput:
    """Run ``options.kernel()`` on NumPyro: ``lax.scan`` over steps, chains vectorised; the
    pieces above make the update, the phases and the starts."""
    n = target.num_data
    options = options.for_data(n)
    batch = options.resolved_batch_size(n)
    value_and_grad, transforms = _gradient(target, batch)
    init, _ = options.kernel(cos=jnp.cos)
    names = [site.name for site in target.spec.sites()]
    burn, sample = _phases(_update(value_and_grad, options, names), options, transforms)
    carry = _start(init, target, options, seed, name, names)
    key_burn, key_sample = jax.random.split(jax.random.PRNGKey(child_seed(seed, name)))
    burn_keys = jax.random.split(key_burn, options.num_chains)
    sample_keys = jax.random.split(key_sample, options.num_chains)
    burn_idx, sample_idx = _minibatches(target, options, batch, seed, name)

    start = now()
    # What burn and sample close over: the kernel's options and the model (and n, batch), the
    # step size and the model's numbers aside: arguments, so that a grid of them runs one program.
    step_size = jnp.asarray(options.step_size, dtype=jnp.result_type(float))
    key, data, axes = (
        ("sgmcmc", replace(options, step_size=None), numberless(target.spec), n, batch),
        (target.x, target.y, ops.numbers(target.spec), step_size),
        (0, 0, 0, None),
    )
    burn_fn = compiled(
        (*key, "burn"), jax.vmap(burn, in_axes=axes), carry, burn_keys, burn_idx, data
    )
    sample_fn = compiled(
        (*key, "sample"), jax.vmap(sample, in_axes=axes), carry, sample_keys, sample_idx, data
    )
    ready = now()
    carry = jax.block_until_ready(burn_fn(carry, burn_keys, burn_idx, data))
    warm = now()
    carry, (theta, infos) = jax.block_until_ready(sample_fn(carry, sample_keys, sample_idx, data))
    end = now()
    timings = {"compile": ready - start, "warmup": warm - ready, "sampling": end - warm}
    draws = {k: np.asarray(v) for k, v in theta.items()}
    stats = {"step_size": np.asarray(infos.step_size), "lp": np.asarray(infos.log_density)}
    info = {"batch_size": batch, "chain_method": "vectorized"}
    bad_sites = np.asarray(carry[2]).any(axis=0)
    sites = [site for site, bad in zip(names, bad_sites, strict=True) if bad]
    return finish(name, target, draws, stats, np.asarray(carry[1]), sites, options, timings, info)
