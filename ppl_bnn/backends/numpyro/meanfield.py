"""The ``meanfield`` driver on NumPyro: mean-field VI by a chosen gradient estimator (see
:mod:`ppl_bnn.methods.meanfield`), the whole optimisation one compiled ``lax.scan``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpyro import handlers
from numpyro.optim import Adam

from ppl_bnn.backends.base import Target
from ppl_bnn.backends.numpyro.ops import PPL_NUMPYRO
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.meanfield import (
    finish_meanfield,
    guide_params,
    initial_guide,
    inverse_softplus,
    negative_elbo,
)
from ppl_bnn.methods.optimisation import GaussianGuideOptions, batch_schedule_for, check_losses
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


class KeyNoise:
    """Random numbers from a JAX key, split at each request (traceable under ``jit``)."""

    def __init__(self, key: jax.Array) -> None:
        self.key = key

    def _next(self) -> jax.Array:
        self.key, sub = jax.random.split(self.key)
        return sub

    def normal(self, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.normal(self._next(), shape)

    def rademacher(self, shape: tuple[int, ...]) -> jax.Array:
        return jax.random.rademacher(self._next(), shape, dtype=jnp.float32)


def observe_fn(program: Callable[..., Any]) -> Callable[..., Any]:
    """The program's scaled log-likelihood of ``y`` (see :data:`~ppl_bnn.methods.meanfield.
    Observe`), from NumPyro's trace of it with the sites substituted."""

    def observe(values: Mapping[str, Any], network: Callable, x: Any, y: Any, scale: float) -> Any:
        model = handlers.substitute(program, data=dict(values))
        site = handlers.trace(model).get_trace(x, y, likelihood_scale=scale, network=network)["y"]
        log_p = site["fn"].log_prob(site["value"]).sum()
        return log_p if site["scale"] is None else site["scale"] * log_p

    return observe


def loss_fn(target: Target, options: GaussianGuideOptions) -> Callable[..., jax.Array]:
    """``(params, noise, x, y, likelihood_scale) -> loss``: the negative ELBO averaged over
    ``options.num_particles`` draws, for the guide ``params = {"loc": ..., "rho": ...}`` with
    std ``softplus(rho)`` and random numbers from ``noise`` (a :class:`KeyNoise`)."""
    observe = observe_fn(target.program)

    def loss(params, noise, x, y, likelihood_scale):
        loc = params["loc"]
        scale = {k: jax.nn.softplus(v) for k, v in params["rho"].items()}
        total = 0.0
        for _ in range(options.num_particles):
            total = total + negative_elbo(
                target.spec,
                options.estimator,
                loc,
                scale,
                x,
                y,
                likelihood_scale,
                noise,
                observe,
                PPL_NUMPYRO,
                jnp,
            )
        return total / options.num_particles

    return loss


def run(name: str, target: Target, options: GaussianGuideOptions, seed: int) -> RunOutput:
    """Fit the mean-field guide by ``options.estimator`` with Adam."""
    x, y = target.x, target.y
    batch, scale = options.likelihood_scale(target.num_data)
    schedule = batch_schedule_for(target.num_data, batch, options, seed)
    schedule = None if schedule is None else jnp.asarray(schedule)
    loc, std, init = initial_guide(name, target, options, seed)
    params = {
        "loc": {k: jnp.asarray(v) for k, v in loc.items()},
        "rho": {k: jnp.asarray(inverse_softplus(v)) for k, v in std.items()},
    }
    optimiser = Adam(options.learning_rate)
    loss = loss_fn(target, options)
    key = jax.random.PRNGKey(child_seed(seed, "svi"))

    def one_step(carry, inputs):
        state, stopped = carry
        i, idx = inputs
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        step_key = jax.random.fold_in(key, i)
        (value, _), new = optimiser.eval_and_update(
            lambda p: (loss(p, KeyNoise(step_key), xb, yb, scale), None), state
        )
        # After a non-finite loss the state stays where the optimisation broke down (as in
        # the autoguide driver), so that check_losses names the sites that broke down.
        new = jax.tree.map(lambda a, b: jnp.where(stopped, b, a), new, state)
        return (new, stopped | ~jnp.isfinite(value)), value

    def optimise(state, schedule):
        steps = jnp.arange(options.num_steps)
        (state, _), losses = lax.scan(one_step, (state, jnp.array(False)), (steps, schedule))
        return state, losses

    start = now()
    state = optimiser.init(params)
    compiled = jax.jit(optimise).lower(state, schedule).compile()
    compiled_at = now()
    state, losses = jax.block_until_ready(compiled(state, schedule))
    end = now()
    fitted = optimiser.get_params(state)
    loc = {k: np.asarray(v) for k, v in fitted["loc"].items()}
    std = {k: np.asarray(jax.nn.softplus(v)) for k, v in fitted["rho"].items()}
    losses = np.asarray(losses)
    check_losses(name, target, options, losses, guide_params(loc, std))
    timings = {"compile": compiled_at - start, "warmup": end - compiled_at}
    out = finish_meanfield(name, target, options, seed, losses, (loc, std), timings, {}, init)
    out.timings["sampling"] = now() - end
    return out
