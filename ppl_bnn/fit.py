"""``fit``: one entry point for every (method, backend)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import numpy as np

from ppl_bnn import devices
from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import DEFAULT_BACKEND, get_backend
from ppl_bnn.fit_support import FitPlan, plan_fit
from ppl_bnn.methods import shared
from ppl_bnn.methods.divergence import check_finite_draws
from ppl_bnn.model.bnn import BNN
from ppl_bnn.predictive import check_linearised_at, log_likelihood_per_draw, predictive_at
from ppl_bnn.results import FitResult
from ppl_bnn.timing import now
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)


def fit(
    model: BNN,
    method: str = "svi",
    *,
    backend: str = DEFAULT_BACKEND,
    seed: int = 0,
    validation: tuple[Any, Any] | None = None,
    **options: Any,
) -> FitResult:
    """Fit ``model`` by ``method`` on ``backend``, once every check of
    :mod:`ppl_bnn.fit_support` has passed.

    ``map``, ``swag``, ``multiswag`` and ``ensemble`` predict from point estimates and what SGD
    finds near them. By default they stop early on a held-out tenth of the training points
    (``keep="validation"``, :mod:`ppl_bnn.methods.early_stopping`); where they keep a mode
    instead, with fewer than 4 training points per weight
    (:data:`ppl_bnn.methods.base.MIN_POINTS_PER_WEIGHT`), a logged warning says their
    predictive is likely over-confident. ``mcdropout``'s rate has no default that suits every
    set: ``fit`` warns where it is not given (``Method.tuned_by_default``).

    Args:
        model: A :class:`~ppl_bnn.BNN` (spec plus training data).
        method: ``"svi"``, ``"lowrank"``, ``"fullrank"``, ``"map"``, ``"laplace"``, ``"swag"``,
            ``"mcdropout"``, ``"ensemble"``, ``"multiswag"``, ``"nuts"``, ``"hmc"``, ``"mclmc"``,
            ``"sgld"``, ``"sghmc"``, ``"csgld"`` or ``"csghmc"`` (see
            :func:`ppl_bnn.available_methods`).
        backend: ``"numpyro"`` (default) or ``"pyro"``.
        seed: An integer from 0 to ``2**64 - 1``; the same seed gives the same draws on CPU.
        validation: Held-out ``(x_val, y_val)``, checked as the training data are (labels as
            the model's data gave them, :meth:`~ppl_bnn.BNN.held_out`), for a method that
            records training curves (``svi``): its held-out log-likelihood is recorded at each
            checkpoint (:mod:`ppl_bnn.methods.curves`). It is never used to fit.
        **options: Method options, e.g. ``num_steps`` for SVI or ``num_warmup`` for NUTS; an
            unknown name raises an error listing the valid ones, and an option that only
            another backend reads (Pyro's ``potential``, ``update``, ``jit``) an error naming
            that backend.

    Returns:
        A :class:`~ppl_bnn.FitResult` with draws shaped (chain, draw, ...), all finite. Where a
        method broke down but kept finite draws (SG-MCMC draws before the divergence, the
        ensemble members that stayed finite), ``info["diverged"]`` is True and
        ``diverged_at_step``, ``diverged_sites`` and ``diverged_cause`` say where and why.
        With a learned prior, ``info["learned_prior"]`` holds its fitted hyperparameters (one
        dict per member for ``ensemble``). ``svi`` records its training curve in
        ``info["training_curve"]`` when given ``validation`` or ``curve_every``. A method
        that predicts with the network linearised around its mode (the GLM predictive, see
        :mod:`ppl_bnn.predictive`) returns that mode in ``linearised_at``; the training
        log-likelihood and every prediction of the result then use the linearised network.
        Where runs were handed back instead of made (:mod:`ppl_bnn.methods.shared`; the
        benchmark's shared-fit store, :mod:`ppl_bnn.bench.fit_store`),
        ``info["shared_fits"]`` lists them and ``timings["shared"]`` is what producing them
        took, which ``timings["total"]`` includes.

    Raises:
        ValueError: A ``seed`` that is no integer from 0 to ``2**64 - 1`` (what a saved fit stores).
        ValueError: ``validation`` for a method that records no training curve, or held-out
            data that do not fit the model (named ``x_val`` or ``y_val``).
        TypeError: ``validation`` that is not a pair.
        ValueError: A learned prior (``ScaleMixture(learned=True)``) with a method that cannot
            fit its hyperparameters (the samplers and ``laplace``).
        InsufficientMemoryError: The fit needs more memory than is available, at the least
            (:mod:`ppl_bnn.methods.memory`); raised before it starts.
        DivergedError: The method broke down numerically (a non-finite loss, draw, step or
            log density) and kept no usable draw; the message names the step, the sites where
            known and the likely cause (:mod:`ppl_bnn.methods.divergence`).

    Example:
        >>> import numpy as np
        >>> from ppl_bnn import BNN, fit
        >>> x = np.linspace(-1, 1, 30)[:, None]
        >>> model = BNN(x, 2 * x[:, 0], hidden=(), noise=0.1)
        >>> result = fit(model, "svi", num_steps=200, num_draws=50)
        >>> result.draws["w0"].shape
        (1, 50, 1, 1)
    """
    plan = plan_fit(model, method, backend, seed, validation, options)
    logger.info("fitting %s on %s (seed %d)", method, backend, plan.seed)
    return _fit(plan, model)


def _fit(plan: FitPlan, model: BNN) -> FitResult:
    """Run the planned method, check its draws, and score them on the training data."""
    method, backend = plan.method, plan.backend
    start = now()
    # Before anything compiles (NumPyro: JAX's persistent cache on, its hits counted).
    compilations = get_backend(backend).fit_compilations()
    target = Target.build(backend, model, plan.held_out)
    with shared.collect() as reused:  # runs read from the shared-fit store, if one is open
        out = plan.entry.run_on(backend)(method, target, plan.options, plan.seed)
    check_finite_draws(method, out.draws, model)  # every method's last line of defence
    mode = None
    if out.linearised_at is not None:  # the GLM predictive around the runner's mode
        mode = check_linearised_at(model.spec, out.linearised_at)
    ll_start = now()
    train = predictive_at(backend, model.spec, out.draws, model.x, linearised_at=mode)
    ll = log_likelihood_per_draw(model.spec, train.f, train.noise_std, model.y)
    end = now()
    if not np.all(np.isfinite(ll)):
        logger.warning("%s/%s: non-finite training log-likelihood in some draws", method, backend)
    # What producing the shared runs cost counts as this fit's, as if it had run them.
    shared_s = sum(run["seconds"] for run in reused)
    timings = {**out.timings, "log_likelihood": end - ll_start, "total": end - start + shared_s}
    info = {"diverged": False, **out.info, "device": devices.current()}
    if reused:
        timings["shared"] = shared_s
        info["shared_fits"] = reused
    if compilations is not None:
        info["jax_cache"] = compilations.finish()
    _log_fitted(method, backend, timings)
    chains, draws = next(iter(out.draws.values())).shape[:2]
    return FitResult(
        spec=model.spec,
        method=method,
        backend=backend,
        seed=plan.seed,
        options=asdict(plan.options),
        draws=out.draws,
        log_likelihood=ll.reshape(chains, draws, -1),
        observed=model.y.copy(),
        timings=timings,
        sample_stats=out.sample_stats,
        losses=out.losses,
        variational=out.variational,
        info=info,
        versions=library_versions(),
        linearised_at=mode,
    )


def _log_fitted(method: str, backend: str, timings: dict[str, float]) -> None:
    compiling = timings.get("compile")
    logger.info(
        "%s on %s fitted in %.1f s%s",
        method, backend, timings["total"],
        "" if compiling is None else f" ({compiling:.1f} s of it compiling)",
    )  # fmt: skip
