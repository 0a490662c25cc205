"""The ``mams`` driver on NumPyro: BlackJAX's adjusted MCLMC kernel (a uniformly drawn number of
integrator steps per proposal) and its tuner, run by the microcanonical driver of
:mod:`ppl_bnn.backends.numpyro.mclmc` (starts, vectorised chains, frozen chains retuned or
dropped); see :mod:`ppl_bnn.methods.mams`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.mclmc_adaptation import MCLMCAdaptationState
from blackjax.mcmc import adjusted_mclmc_dynamic
from blackjax.mcmc.adjusted_mclmc import rescale
from jax import lax

from ppl_bnn.backends.numpyro.flat import FlatDensity
from ppl_bnn.backends.numpyro.mclmc import Dynamics, run_chains
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.mams import START_STEP_PER_ROOT_DIM, TUNING_FRACTIONS, MAMSOptions

#: The most integrator steps of one proposal. The mean is a few steps; the cap only matters
#: where the tuned step size is not finite, which would otherwise ask for a number of steps that
#: is not a number (a chain started where the density is not finite) and never end.
MAX_STEPS = 1000


def _integration_steps(key: jax.Array, mean_steps: jax.Array) -> jax.Array:
    """BlackJAX's random trajectory length, ``ceil(U * s)`` with ``s`` such that its mean is
    ``mean_steps``, at least one step, kept finite and at most :data:`MAX_STEPS`."""
    steps = jnp.ceil(jax.random.uniform(key) * rescale(mean_steps))
    steps = jnp.where(jnp.isfinite(steps), steps, 1.0)
    return jnp.clip(steps, 1, MAX_STEPS).astype(jnp.int32)


def _programs(density: FlatDensity, options: MAMSOptions) -> tuple[Callable, Callable]:
    """Adjusted MCLMC's ``tune`` and ``sample`` (see
    :class:`~ppl_bnn.backends.numpyro.mclmc.Dynamics`); its draws' stats: the mean acceptance
    probability and the integrator steps (gradients) of each kept draw's ``thinning``
    proposals."""
    kernel = adjusted_mclmc_dynamic.build_kernel(integration_steps_fn=_integration_steps)
    frac1, frac2, frac3 = TUNING_FRACTIONS

    def tune(position, key, step_size, data):
        logdensity = partial(density.log_density, data=data)
        init_key, tune_key = jax.random.split(key)
        state = adjusted_mclmc_dynamic.init(position, logdensity, init_key)
        start = MCLMCAdaptationState(
            L=options.num_integration_steps * step_size,
            step_size=step_size,
            inverse_mass_matrix=jnp.ones(density.dim),
        )
        state, params, _ = blackjax.adjusted_mclmc_find_L_and_step_size(
            mclmc_kernel=kernel, logdensity_fn=logdensity, num_steps=options.num_warmup,
            state=state, rng_key=tune_key, target=options.target_accept, frac_tune1=frac1,
            frac_tune2=frac2, frac_tune3=frac3,
            diagonal_preconditioning=options.diagonal_preconditioning, params=start,
            target_num_integration_steps=options.num_integration_steps,
        )  # fmt: skip
        return state, params

    def sample(state, params, key, data):
        logdensity = partial(density.log_density, data=data)
        mean_steps = params.L / params.step_size

        def step(state, key):
            return kernel(
                key, state, logdensity, params.step_size,
                inverse_mass_matrix=params.inverse_mass_matrix,
                integration_steps_params=(mean_steps,),
            )  # fmt: skip

        def block(state, key):  # ``thinning`` proposals, keeping the last position
            state, info = lax.scan(step, state, jax.random.split(key, options.thinning))
            return state, {
                "position": state.position,
                "lp": state.logdensity,
                "accept_prob": jnp.mean(info.acceptance_rate),
                "n_steps": jnp.sum(info.num_integration_steps),
                "diverging": jnp.any(info.is_divergent),
            }

        _, kept = lax.scan(block, state, jax.random.split(key, options.num_samples))
        return kept

    in_axes = (0, 0, 0, None)
    return jax.vmap(tune, in_axes=in_axes), jax.vmap(sample, in_axes=in_axes)


def _acceptance(stats: dict[str, np.ndarray], dim: int) -> dict[str, np.ndarray]:
    """Each chain's mean acceptance probability over its kept draws' proposals."""
    return {"acceptance": np.mean(stats["accept_prob"], axis=1)}


def _sizes(options: MAMSOptions) -> tuple:
    return (
        options.num_warmup,
        options.target_accept,
        options.num_integration_steps,
        options.diagonal_preconditioning,
    )


ADJUSTED = Dynamics(
    name="mams",
    programs=_programs,
    sizes=_sizes,
    summary=_acceptance,
    start_step=lambda options, dim: options.step_size or START_STEP_PER_ROOT_DIM * dim**0.5,
)


def run(name: str, target: Target, options: MAMSOptions, seed: int) -> RunOutput:
    """Tune and run adjusted MCLMC on every chain at once, from the starts ``options.init``
    says."""
    return run_chains(name, target, options, seed, ADJUSTED)
