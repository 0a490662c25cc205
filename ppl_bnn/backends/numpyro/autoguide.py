"""The ``autoguide`` driver on NumPyro: SVI with the library's autoguides (see
:mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import SVI, init_to_value
from numpyro.optim import Adam

from ppl_bnn.backends.numpyro import ops
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
from ppl_bnn.model.program import numberless
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


@dataclass(frozen=True)
class _Fit:
    """One autoguide fit's pieces: its SVI (model program, guide, Adam, ELBO), the guide, the
    training data and the full data as program arguments ``(x, y, {"likelihood_scale": ...,
    "numbers": ...})`` (the model's numbers, :func:`~ppl_bnn.model.program.model_numbers`), and
    the key its compiled programs are kept under (what they close over: the model without its
    numbers and the options, the KL weight aside, so that fits differing only in these run one
    program: the settings a tuning grid tries, the seeds and splits of a cell)."""

    svi: SVI
    guide: Any
    data: tuple
    full: tuple
    program_key: tuple


def _fit_parts(target: Target, options: OptimisationOptions, guide_start: dict) -> _Fit:
    """The SVI of ``options.GUIDE`` on ``target``, its guide started at ``guide_start``."""
    program = target.program
    guide = guide_class(options.GUIDE)(
        program, init_loc_fn=init_to_value(values=guide_start), **options.guide_kwargs()
    )
    svi = SVI(program, guide, Adam(options.learning_rate), OrderedTraceELBO(options.num_particles))
    _, scale = options.likelihood_scale(target.num_data)
    as_float = partial(jnp.asarray, dtype=jnp.result_type(float))
    variant = target.variant
    numbers = ops.numbers(target.spec, variant)
    return _Fit(
        svi=svi,
        guide=guide,
        data=(target.x, target.y, {"likelihood_scale": as_float(scale), "numbers": numbers}),
        full=(
            target.x,
            target.y,
            {"likelihood_scale": as_float(1.0 / options.kl_weight), "numbers": numbers},
        ),
        program_key=(
            "autoguide",
            numberless(target.spec),
            variant.numberless() if variant else None,
            replace(options, kl_weight=1.0),
        ),
    )


def _step(fit: _Fit, keep_lowest: bool) -> Callable[..., Any]:
    """One SVI update on a minibatch (all the data where ``idx`` is None): ``(carry, idx,
    active, data) -> (carry, (loss, log-likelihood term))``, the carry ``((state, lowest),
    stopped)``; with ``keep_lowest``, ``lowest`` follows the parameters of lowest loss."""

    def one_step(carry, idx, active, data):
        (state, lowest), stopped = carry
        x_all, y_all, kwargs = data
        xb, yb = (x_all, y_all) if idx is None else (x_all[idx], y_all[idx])
        set_up(fit.guide, xb, yb, **kwargs)  # not on the step's random stream
        new, loss, log_lik = update(fit.svi, state, xb, yb, **kwargs)
        if keep_lowest:
            params, steps = fit.svi.get_params(state), state.optim_state[0]
            lowest = _lower(lowest, loss, params, steps, active)
        new, stopped = hold(new, state, stopped, loss, active)
        return ((new, lowest), stopped), (loss, log_lik)

    return traced(fit.guide, one_step)


def _recorder(fit: _Fit, target: Target, options: OptimisationOptions, curve: Any) -> Callable:
    """The checkpoint of the training curve at a scan's ``(state, lowest)``."""
    kinds = ("loc",) if options.GUIDE == "AutoDelta" else ("loc", "scale")

    def record(state):
        params = fit.svi.get_params(state[0])
        at = [{s.name: params[f"{s.name}_auto_{k}"] for s in target.spec.sites()} for k in kinds]
        if options.GUIDE == "AutoDelta":
            curve.checkpoint_point(at[0], keep=lambda: params)
        else:
            curve.checkpoint(*at)

    return record


def _lowest_loss_params(fit: _Fit, state: Any, lowest: tuple, losses: np.ndarray) -> tuple:
    """``(params, kept step, seconds to compile the last loss)`` of ``keep="lowest"``: the
    loss after the last step is the one iterate the scan did not score."""

    def loss_at(state, data):
        set_up(fit.guide, data[0], data[1], **data[2])
        return fit.svi.evaluate(state, data[0], data[1], **data[2])

    start = now()
    evaluate = compiled((*fit.program_key, "evaluate"), traced(fit.guide, loss_at), state, fit.data)
    compile_s = now() - start
    kept = kept_step(losses, float(evaluate(state, fit.data)))
    params = lowest[1] if kept < len(losses) else fit.svi.get_params(state)
    return params, kept, compile_s


def _check_laplace_factor(fit: _Fit, params: dict, options: OptimisationOptions) -> None:
    """``HessianError`` where the Laplace guide's Cholesky factor is not that of a positive
    definite Hessian: NumPyro sets a NaN factor to 0 (it warns, but only eagerly), and a factor
    of the inverse must have a positive diagonal."""

    def factored(params, data):
        set_up(fit.guide, data[0], data[1], **data[2])
        diagonal = jnp.diagonal(fit.guide.get_transform(params).scale_tril)
        return jnp.all(jnp.isfinite(diagonal) & (diagonal > 0))

    key = (*fit.program_key, "laplace")
    factor = compiled(key, traced(fit.guide, factored), params, fit.full)
    if not bool(factor(params, fit.full)):
        raise HessianError(HESSIAN_MESSAGE.format(steps=options.num_steps))


def _sample(fit: _Fit, key: jax.Array, params: dict, num: int) -> tuple[dict, float, float]:
    """``(draws, compile seconds, sampling seconds)``: ``num`` draws of the fitted guide."""

    def draw(key, params, data):
        set_up(fit.guide, data[0], data[1], **data[2])
        return fit.guide.sample_posterior(key, params, sample_shape=(num,))

    start = now()
    sample = compiled((*fit.program_key, "sample"), traced(fit.guide, draw), key, params, fit.full)
    compiled_at = now()
    draws = jax.block_until_ready(sample(key, params, fit.full))
    return {k: np.asarray(v) for k, v in draws.items()}, compiled_at - start, now() - compiled_at


def _variational(target: Target, options: OptimisationOptions, params: dict) -> dict | None:
    """The mean-field guide's ``loc`` and ``scale`` by site (``AutoNormal`` only)."""
    if options.GUIDE != "AutoNormal":
        return None
    names = [site.name for site in target.spec.sites()]
    return {
        kind: {name: np.asarray(params[f"{name}_auto_{kind}"]) for name in names}
        for kind in ("loc", "scale")
    }


def run(name: str, target: Target, options: OptimisationOptions, seed: int) -> RunOutput:
    """Fit ``options.GUIDE`` by SVI, the whole optimisation one compiled ``lax.scan`` (with a
    training curve, one scan per checkpoint, :mod:`ppl_bnn.backends.numpyro.steps`): the
    pieces above initialised, stepped, kept and sampled."""
    keep = options.kept_iterate(target.num_data)
    if keep == "validation":
        target = held_out_split(target, seed)
    start_values = initial_values(name, target, options, seed)
    # Filled from the initialisation program's argument while it is traced (svi_init).
    guide_start = {k: jnp.asarray(v) for k, v in start_values.values.items()}
    fit = _fit_parts(target, options, guide_start)
    batch, _ = options.likelihood_scale(target.num_data)
    schedule = batch_schedule_for(target.num_data, batch, options, seed)
    curve = make_curve(target, options, seed, keep_best=keep == "validation")
    key_init, key_draws = jax.random.split(jax.random.PRNGKey(child_seed(seed, "svi")))
    start = now()
    # Initialised on the full data so that Laplace's Hessian is the full-data one.
    init_key = ("autoguide", *fit.program_key[1:3], options.GUIDE, options.guide_kwargs())
    state = initialise(fit.svi, key_init, fit.full, guide_start, init_key)
    lowest = (jnp.asarray(jnp.inf, dtype=float), fit.svi.get_params(state))
    initialised = now()
    (state, lowest), (losses, log_lik), compile_s, run_s = run_steps(
        _step(fit, keep == "lowest"), (state, lowest if keep == "lowest" else None),
        None if schedule is None else jnp.asarray(schedule), options.num_steps, curve,
        _recorder(fit, target, options, curve), fit.program_key, fit.data,
        loop=steps_in_loop(target.spec),
    )  # fmt: skip
    end = now()
    params, losses = fit.svi.get_params(state), np.asarray(losses)
    check_losses(name, target, options, losses, params)
    info: dict = {"elbo": "OrderedTraceELBO", "guide": options.GUIDE}
    evaluate_s = 0.0
    if keep == "lowest":
        params, info["kept_step"], evaluate_s = _lowest_loss_params(fit, state, lowest, losses)
    if keep == "validation":
        params, info["kept_step"] = curve.best, curve.best_step
    evaluated = now()
    if options.GUIDE == "AutoLaplaceApproximation":
        _check_laplace_factor(fit, params, options)
    checked = now()
    draws, sample_compile_s, sampling_s = _sample(fit, key_draws, params, options.draws)
    # Initialisation traces the model and guide; the scan, the last loss, the factor check (run
    # too, as before sampling) and the guide sampler compile.
    timings = {
        "compile": (initialised - start)
        + compile_s
        + evaluate_s
        + (checked - evaluated)
        + sample_compile_s,
        "warmup": run_s + (evaluated - end - evaluate_s),
        "sampling": sampling_s,
    }
    if curve is not None:
        timings["curves"] = curve.seconds
        info.update(curve.info(losses, np.asarray(log_lik)))
    info.update(learned_prior_info(target, params))
    info.update(dropout_rates_info(params))
    add_start(timings, info, start_values)
    return finish(
        name, target, options, losses, draws, timings, _variational(target, options, params), info
    )


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
