"""The ``autoguide`` driver on NumPyro: SVI with the library's autoguides (see
:mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import SVI, init_to_value
from numpyro.optim import Adam

from ppl_bnn.backends.numpyro.elbo import OrderedTraceELBO, update
from ppl_bnn.backends.numpyro.guides import guide_class
from ppl_bnn.backends.numpyro.programs import compiled
from ppl_bnn.backends.numpyro.steps import hold, run_steps, steps_in_loop
from ppl_bnn.backends.numpyro.svi_init import initialise, set_up, traced
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import HessianError, RunOutput
from ppl_bnn.methods.curves import make_curve
from ppl_bnn.methods.early_stopping import held_out_split
from ppl_bnn.methods.initialisation import add_start, initial_values
from ppl_bnn.methods.optimisation import (
    HESSIAN_MESSAGE,
    OptimisationOptions,
    batch_schedule_for,
    check_losses,
    dropout_rates_info,
    finish,
    kept_step,
    learned_prior_info,
)
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


def run(name: str, target: Target, options: OptimisationOptions, seed: int) -> RunOutput:
    """Fit ``options.GUIDE`` by SVI, the whole optimisation one compiled ``lax.scan`` (with a
    training curve, one scan per checkpoint, :mod:`ppl_bnn.backends.numpyro.steps`)."""
    keep = options.kept_iterate(target.num_data)
    if keep == "validation":
        target = held_out_split(target, seed)
    x, y, program = target.x, target.y, target.program
    start_values = initial_values(name, target, options, seed)
    # Filled from the initialisation program's argument while it is traced (svi_init).
    guide_start = {k: jnp.asarray(v) for k, v in start_values.values.items()}
    guide = guide_class(options.GUIDE)(
        program, init_loc_fn=init_to_value(values=guide_start), **options.guide_kwargs()
    )
    elbo = OrderedTraceELBO(options.num_particles)
    svi = SVI(program, guide, Adam(options.learning_rate), elbo)
    batch, scale = options.likelihood_scale(target.num_data)
    full_scale = 1.0 / options.kl_weight
    schedule = batch_schedule_for(target.num_data, batch, options, seed)
    schedule = None if schedule is None else jnp.asarray(schedule)

    curve = make_curve(target, options, seed, keep_best=keep == "validation")
    keep_lowest = keep == "lowest"

    def one_step(carry, idx, active, data):
        (state, lowest), stopped = carry
        x_all, y_all, scale = data
        xb, yb = (x_all, y_all) if idx is None else (x_all[idx], y_all[idx])
        set_up(guide, xb, yb, likelihood_scale=scale)  # not on the step's random stream
        new, loss, log_lik = update(svi, state, xb, yb, likelihood_scale=scale)
        if keep_lowest:
            lowest = _lower(lowest, loss, svi.get_params(state), state.optim_state[0], active)
        new, stopped = hold(new, state, stopped, loss, active)
        return ((new, lowest), stopped), (loss, log_lik)

    def record(state):
        """The checkpoint of the training curve at ``state``."""
        params = svi.get_params(state[0])
        at = [{s.name: params[f"{s.name}_auto_{k}"] for s in target.spec.sites()} for k in kinds]
        if options.GUIDE == "AutoDelta":
            curve.checkpoint_point(at[0], keep=lambda: params)
        else:
            curve.checkpoint(*at)

    kinds = ("loc",) if options.GUIDE == "AutoDelta" else ("loc", "scale")

    # What the programs below close over: the model (its spec and variant) and the options. The
    # data and the likelihood scale are arguments, so fits that differ only in the KL weight (a
    # beta sweep) run one program.
    program_key = ("autoguide", target.spec, target.variant, replace(options, kl_weight=1.0))
    data = (x, y, jnp.asarray(scale, dtype=jnp.result_type(float)))
    key_init, key_draws = jax.random.split(jax.random.PRNGKey(child_seed(seed, "svi")))
    start = now()
    # Initialised on the full data so that Laplace's Hessian is the full-data one.
    full = (x, y, jnp.asarray(full_scale, dtype=jnp.result_type(float)))
    init_key = ("autoguide", target.spec, target.variant, options.GUIDE, options.guide_kwargs())
    state = initialise(svi, key_init, full, guide_start, init_key)
    lowest = (jnp.asarray(jnp.inf, dtype=float), svi.get_params(state)) if keep_lowest else None
    initialised = now()
    (state, lowest), (losses, log_lik), compile_s, run_s = run_steps(
        traced(guide, one_step),
        (state, lowest),
        schedule,
        options.num_steps,
        curve,
        record,
        program_key,
        data,
        loop=steps_in_loop(target.spec),
    )
    end = now()
    params = svi.get_params(state)
    losses = np.asarray(losses)
    check_losses(name, target, options, losses, params)
    info: dict = {"elbo": "OrderedTraceELBO", "guide": options.GUIDE}
    evaluate_s = 0.0
    if keep_lowest:  # the loss after the last step, the one iterate the scan did not score

        def loss_at(state, data):
            set_up(guide, data[0], data[1], likelihood_scale=data[2])
            return svi.evaluate(state, data[0], data[1], likelihood_scale=data[2])

        evaluate = compiled((*program_key, "evaluate"), traced(guide, loss_at), state, data)
        evaluate_s = now() - end
        info["kept_step"] = kept_step(losses, float(evaluate(state, data)))
        if info["kept_step"] < options.num_steps:
            params = lowest[1]
    if keep == "validation":
        params, info["kept_step"] = curve.best, curve.best_step
    evaluated = now()
    if options.GUIDE == "AutoLaplaceApproximation":
        # Where the Hessian at the mode is not positive definite, its Cholesky factor is NaN,
        # which NumPyro sets to 0 (it warns, but only eagerly): a factor of the inverse must
        # have a positive diagonal.
        def factored(params, data):
            set_up(guide, data[0], data[1], likelihood_scale=data[2])
            diagonal = jnp.diagonal(guide.get_transform(params).scale_tril)
            return jnp.all(jnp.isfinite(diagonal) & (diagonal > 0))

        factor = compiled((*program_key, "laplace"), traced(guide, factored), params, full)
        if not bool(factor(params, full)):
            raise HessianError(HESSIAN_MESSAGE.format(steps=options.num_steps))

    def draw(key, params, data):
        set_up(guide, data[0], data[1], likelihood_scale=data[2])
        return guide.sample_posterior(key, params, sample_shape=(options.draws,))

    sample = compiled((*program_key, "sample"), traced(guide, draw), key_draws, params, full)
    sampler_compiled = now()
    draws = jax.block_until_ready(sample(key_draws, params, full))
    drawn = now()
    variational = None
    if options.GUIDE == "AutoNormal":
        names = [site.name for site in target.spec.sites()]
        variational = {
            kind: {name: np.asarray(params[f"{name}_auto_{kind}"]) for name in names}
            for kind in ("loc", "scale")
        }
    # Initialisation traces the model and guide; lower().compile() builds the scan and the
    # guide sampler.
    timings = {
        "compile": (initialised - start) + compile_s + evaluate_s + (sampler_compiled - evaluated),
        "warmup": run_s + (evaluated - end - evaluate_s),
        "sampling": drawn - sampler_compiled,
    }
    if curve is not None:
        timings["curves"] = curve.seconds
        info.update(curve.info(losses, np.asarray(log_lik)))
    info.update(learned_prior_info(target, params))
    info.update(dropout_rates_info(params))
    add_start(timings, info, start_values)
    draws = {k: np.asarray(v) for k, v in draws.items()}
    return finish(name, target, options, losses, draws, timings, variational, info)


def _lower(
    lowest: tuple, loss: jax.Array, params: dict, steps: jax.Array, active: jax.Array | None
) -> tuple:
    """``(loss, params)`` of lowest loss so far among the parameters after one step or more (ties
    to the later; see :func:`~ppl_bnn.methods.optimisation.kept_step`); ``steps``: the updates
    taken before ``params``, ``active``: False on a padding step (None: every step counts)."""
    take = jnp.isfinite(loss) & (loss <= lowest[0]) & (steps > 0)
    if active is not None:
        take = take & active
    return jax.tree.map(lambda new, old: jnp.where(take, new, old), (loss, params), lowest)
