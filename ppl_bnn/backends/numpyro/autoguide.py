"""The ``autoguide`` driver on NumPyro: SVI with the library's autoguides (see
:mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpyro.infer import SVI, autoguide, init_to_value
from numpyro.optim import Adam

from ppl_bnn.backends.base import Target
from ppl_bnn.backends.numpyro import ops
from ppl_bnn.backends.numpyro.elbo import OrderedTraceELBO
from ppl_bnn.methods.base import HessianError, RunOutput
from ppl_bnn.methods.initialisation import add_start, initial_values
from ppl_bnn.methods.optimisation import (
    HESSIAN_MESSAGE,
    OptimisationOptions,
    batch_schedule_for,
    check_losses,
    finish,
    learned_prior_info,
    loss_error,
)
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


def run(name: str, target: Target, options: OptimisationOptions, seed: int) -> RunOutput:
    """Fit ``options.GUIDE`` by SVI, the whole optimisation one compiled ``lax.scan``."""
    x, y, program = target.x, target.y, target.program
    start_values = initial_values(name, target, options, seed)
    values = {k: jnp.asarray(v) for k, v in start_values.values.items()}
    guide = getattr(autoguide, options.GUIDE)(
        program, init_loc_fn=init_to_value(values=values), **options.guide_kwargs()
    )
    elbo = OrderedTraceELBO(options.num_particles)
    svi = SVI(program, guide, Adam(options.learning_rate), elbo)
    batch, scale = options.likelihood_scale(target.num_data)
    full_scale = 1.0 / options.kl_weight
    schedule = batch_schedule_for(target.num_data, batch, options, seed)
    schedule = None if schedule is None else jnp.asarray(schedule)

    def one_step(carry, idx):
        state, stopped = carry
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        new, loss = svi.update(state, xb, yb, likelihood_scale=scale)
        # After a non-finite loss the state stays where the optimisation broke down, as Pyro's
        # loop stops there, so that check_losses names the sites that broke down on both.
        new = jax.tree.map(lambda a, b: jnp.where(stopped, b, a), new, state)
        return (new, stopped | ~jnp.isfinite(loss)), loss

    def optimise(state, schedule):
        (state, _), losses = lax.scan(
            one_step, (state, jnp.array(False)), schedule, length=options.num_steps
        )
        return state, losses

    key_init, key_draws = jax.random.split(jax.random.PRNGKey(child_seed(seed, "svi")))
    start = now()
    # Initialised on the full data so that Laplace's Hessian is the full-data one.
    # NumPyro refuses to start where the loss is not finite: a breakdown at step 0.
    with ops.no_valid_start_as(lambda: loss_error(name, target, options, 0)):
        state = svi.init(key_init, x, y, likelihood_scale=full_scale)
    compiled = jax.jit(optimise).lower(state, schedule).compile()
    compiled_at = now()
    state, losses = jax.block_until_ready(compiled(state, schedule))
    end = now()
    params = svi.get_params(state)
    losses = np.asarray(losses)
    check_losses(name, target, options, losses, params)
    if options.GUIDE == "AutoLaplaceApproximation":
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Hessian of log posterior at the MAP")
            try:
                guide.get_transform(params)
            except UserWarning as err:
                raise HessianError(HESSIAN_MESSAGE.format(steps=options.num_steps)) from err
    sample = jax.jit(lambda key, p: guide.sample_posterior(key, p, sample_shape=(options.draws,)))
    sample = sample.lower(key_draws, params).compile()
    sampler_compiled = now()
    draws = jax.block_until_ready(sample(key_draws, params))
    drawn = now()
    variational = None
    if options.GUIDE == "AutoNormal":
        names = [site.name for site in target.spec.sites()]
        variational = {
            kind: {name: np.asarray(params[f"{name}_auto_{kind}"]) for name in names}
            for kind in ("loc", "scale")
        }
    # Initialisation traces the model and guide; lower().compile() builds the whole scan and
    # the guide sampler.
    timings = {
        "compile": (compiled_at - start) + (sampler_compiled - end),
        "warmup": end - compiled_at,
        "sampling": drawn - sampler_compiled,
    }
    info = {"elbo": "OrderedTraceELBO", "guide": options.GUIDE}
    info.update(learned_prior_info(target, params))
    add_start(timings, info, start_values)
    draws = {k: np.asarray(v) for k, v in draws.items()}
    return finish(name, target, options, losses, draws, timings, variational, info)
