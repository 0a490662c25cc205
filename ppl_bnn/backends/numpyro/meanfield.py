"""The ``meanfield`` driver on NumPyro: mean-field VI by a chosen gradient estimator (see
:mod:`ppl_bnn.methods.meanfield`), the whole optimisation one compiled ``lax.scan``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.optim import Adam

from ppl_bnn.backends.numpyro.elbo import scaled_log_likelihood
from ppl_bnn.backends.numpyro.ops import PPL_NUMPYRO
from ppl_bnn.backends.numpyro.steps import hold, run_steps, steps_in_loop
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.curves import make_curve
from ppl_bnn.methods.meanfield import (
    finish_meanfield,
    guide_params,
    initial_guide,
    inverse_softplus,
    particle_terms,
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
        trace = handlers.trace(model).get_trace(x, y, likelihood_scale=scale, network=network)
        return scaled_log_likelihood(trace)

    return observe


def loss_terms_fn(target: Target, options: GaussianGuideOptions) -> Callable[..., Any]:
    """``(params, noise, x, y, likelihood_scale) -> (loss, log_lik)``: the negative ELBO and its
    scaled log-likelihood term, averaged over ``options.num_particles`` draws, for the guide
    ``params = {"loc": ..., "rho": ...}`` with std ``softplus(rho)`` and random numbers from
    ``noise`` (a :class:`KeyNoise`)."""
    particles = particle_terms(target, options, observe_fn(target.program), PPL_NUMPYRO, jnp)

    def terms(params, noise, x, y, likelihood_scale):
        scale = {k: jax.nn.softplus(v) for k, v in params["rho"].items()}
        return particles(params["loc"], scale, noise, x, y, likelihood_scale)

    return terms


def loss_fn(target: Target, options: GaussianGuideOptions) -> Callable[..., jax.Array]:
    """``(params, noise, x, y, likelihood_scale) -> loss``: :func:`loss_terms_fn`'s loss."""
    terms = loss_terms_fn(target, options)
    return lambda *args: terms(*args)[0]


def run(name: str, target: Target, options: GaussianGuideOptions, seed: int) -> RunOutput:
    """Fit the mean-field guide by ``options.estimator`` with Adam, under one compiled
    ``lax.scan`` (with a training curve, one per checkpoint)."""
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
    terms = loss_terms_fn(target, options)
    key = jax.random.PRNGKey(child_seed(seed, "svi"))
    curve = make_curve(target, options, seed)

    def one_step(carry, inputs, active, data):
        state, stopped = carry
        step_key, idx = inputs
        xb, yb = data if idx is None else (data[0][idx], data[1][idx])
        (value, log_lik), new = optimiser.eval_and_update(
            lambda p: terms(p, KeyNoise(step_key), xb, yb, scale), state
        )
        return hold(new, state, stopped, value, active), (value, log_lik)

    def guide_at(state):
        fitted = optimiser.get_params(state)
        return fitted["loc"], {k: jax.nn.softplus(v) for k, v in fitted["rho"].items()}

    start = now()
    state = optimiser.init(params)
    initialised = now()
    # Step i's key is fold_in(key, i), an input of the program (so it holds no seed).
    step_keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(options.num_steps))
    # What the programs close over (the data are arguments).
    program_key = ("meanfield", target.spec, target.variant, options, scale)
    state, (losses, log_lik), compile_s, run_s = run_steps(
        one_step, state, (step_keys, schedule), options.num_steps, curve,
        lambda state: curve.checkpoint(*guide_at(state)), program_key, (x, y),
        loop=steps_in_loop(target.spec),
    )  # fmt: skip
    end = now()
    fitted = optimiser.get_params(state)
    loc = {k: np.asarray(v) for k, v in fitted["loc"].items()}
    std = {k: np.asarray(jax.nn.softplus(v)) for k, v in fitted["rho"].items()}
    losses = np.asarray(losses)
    check_losses(name, target, options, losses, guide_params(loc, std))
    timings = {"compile": (initialised - start) + compile_s, "warmup": run_s}
    info = {}
    if curve is not None:
        timings["curves"] = curve.seconds
        info = curve.info(losses, np.asarray(log_lik))
    out = finish_meanfield(name, target, options, seed, losses, (loc, std), timings, info, init)
    out.timings["sampling"] = now() - end
    return out
