"""Turn one fit into the benchmark's metrics, curves and stored predictions.

Predictions are computed at the dataset's test inputs (and its plotting grid and
out-of-distribution inputs, where it has them), converted to original units, and scored with
:mod:`ppl_bnn.metrics`. Samplers also get convergence diagnostics on predictions (weights are
non-identifiable, so their R-hat says little) and costs per gradient and per effective sample.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppl_bnn import metrics
from ppl_bnn.data import Dataset
from ppl_bnn.methods import get_method, make_options
from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.curves import CURVE_KEY
from ppl_bnn.methods.sgmcmc import SGMCMCOptions
from ppl_bnn.metrics.reference import FIDELITY_DRAWS, FIDELITY_POINTS, evenly
from ppl_bnn.predictive import Prediction, predictive_at, weight_sites
from ppl_bnn.results import FitResult
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: Draws kept in ``predictions.nc`` for comparisons with a reference posterior.
STORED_DRAWS = 200
#: Fractions of weights removed, smallest signal-to-noise first, for the pruning curve.
PRUNE_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98)


#: Regression metrics also scored separately on each part of a test set that reaches beyond
#: the training inputs (``<metric>_in`` and ``<metric>_out``; see ``Dataset.test_inside``).
REGION_METRICS = ("test_ll", "rmse", "crps", "coverage_95", "epistemic_std", "total_std")
#: Classification: inputs whose largest predictive probability is below this are refused
#: (``refused_test``, ``refused_ood``, ``refused_noise``); twice chance for ten classes.
REFUSE_BELOW = 0.2
#: Seed of the uniform-noise inputs scored beside a classification set's OOD set.
NOISE_SEED = 0


@dataclass
class Evaluation:
    """Metrics (flat floats), curves (lists for figures), stored predictions and their timings.

    ``flags`` says why the predictive is unusable (empty when it is usable; see
    :func:`ppl_bnn.metrics.usability_flags`); ``regions`` names the ``_in`` / ``_out`` parts of
    the test set where the dataset has them.
    """

    metrics: dict[str, float] = field(default_factory=dict)
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    predictions: dict[str, tuple[tuple[str, ...], np.ndarray]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    regions: dict[str, str] = field(default_factory=dict)


def _original_units(pred: Prediction, data: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Per-draw means f (S, N) and noise std (S,) in the target's original units."""
    f = pred.f[..., 0].astype(np.float64) * data.y_std + data.y_mean
    return f, np.asarray(pred.noise_std, dtype=np.float64) * data.y_std


def _regression(
    result: FitResult, data: Dataset, out: Evaluation, stored_draws: int, fidelity_draws: int
) -> np.ndarray:
    pred = result.predict(data.x_test)
    f, sigma = _original_units(pred, data)
    y = data.y_test * data.y_std + data.y_mean
    out.metrics.update(metrics.regression_metrics(f, sigma, y))
    out.curves["coverage"] = metrics.calibration_curve(f, sigma, y)
    if data.test_inside is not None:
        _by_region(f, sigma, y, data, out)
    keep = evenly(f.shape[0], stored_draws)
    total_std = np.sqrt(f.var(axis=0) + np.mean(sigma**2))
    out.predictions.update(
        {
            "test_y": (("test",), y),
            "test_mean": (("test",), f.mean(axis=0)),
            "test_std": (("test",), total_std),
            "test_epistemic_std": (("test",), f.std(axis=0)),
            "test_f": (("draw", "test"), f[keep].astype(np.float32)),
            "test_sigma": (("draw",), sigma[keep]),
            **_fidelity_sample(f, sigma, fidelity_draws),
        }
    )
    if data.x_grid is not None:
        gf, gsigma = _original_units(result.predict(data.x_grid), data)
        x_scale = data.x_std[0]
        out.predictions.update(
            {
                "grid_x": (("grid",), data.x_grid[:, 0] * x_scale + data.x_mean[0]),
                "grid_mean": (("grid",), gf.mean(axis=0)),
                "grid_std": (("grid",), np.sqrt(gf.var(axis=0) + np.mean(gsigma**2))),
                "grid_epistemic_std": (("grid",), gf.std(axis=0)),
                "train_x": (("train",), data.x_train[:, 0] * x_scale + data.x_mean[0]),
                "train_y": (("train",), data.y_train * data.y_std + data.y_mean),
            }
        )
    return f


def _fidelity_sample(
    f: np.ndarray, sigma: np.ndarray, draws: int
) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """What fidelity to a reference is measured on (:mod:`ppl_bnn.metrics.reference`): ``draws``
    draws of the predictive at the :data:`~ppl_bnn.metrics.reference.FIDELITY_POINTS` test
    points, both evenly spaced, and which test points they are."""
    points = evenly(f.shape[1], FIDELITY_POINTS)
    kept = evenly(f.shape[0], draws)
    return {
        "fidelity_point": (("fidelity_point",), points),
        "fidelity_f": (("fidelity_draw", "fidelity_point"), f[kept][:, points].astype(np.float32)),
        "fidelity_sigma": (("fidelity_draw",), sigma[kept]),
    }


def _by_region(
    f: np.ndarray, sigma: np.ndarray, y: np.ndarray, data: Dataset, out: Evaluation
) -> None:
    """:data:`REGION_METRICS` on each part of the test set, where each part has points, and
    ``epistemic_std_ratio``, the epistemic std outside over inside: a fit that ignores the
    inputs has a ratio near 1, a posterior that knows where its data lies one well above it."""
    for suffix, mask, name in (
        ("in", data.test_inside, data.regions[0]),
        ("out", ~data.test_inside, data.regions[1]),
    ):
        if not mask.any():
            continue
        scored = metrics.regression_metrics(f[:, mask], sigma, y[mask])
        out.metrics.update({f"{k}_{suffix}": scored[k] for k in REGION_METRICS})
        out.metrics[f"n_test_{suffix}"] = float(mask.sum())
        out.regions[suffix] = name
    inside, outside = out.metrics.get("epistemic_std_in"), out.metrics.get("epistemic_std_out")
    if inside is not None and outside is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            out.metrics["epistemic_std_ratio"] = float(np.float64(outside) / inside)
    out.predictions["test_inside"] = (("test",), data.test_inside.astype(np.int8))


def _usability(result: FitResult, data: Dataset, out: Evaluation) -> None:
    """Scores of the constant predictor fitted to the training targets, the fit's own training
    log-likelihood, and the flags of an unusable fit (all in original units).

    On a set whose test inputs reach where no training input lies (sine: out of range; gap: the
    gap), the test check compares the two on the inside part only (``baseline_test_ll_in``).
    Outside, no predictive has learned anything from the inputs, and the constant, whose spread
    is that of all the targets, is no floor: the default sine set's converged NUTS reference
    scores below it on the whole test set. How a fit behaves there is judged against the
    reference instead (its over-confidence and its fidelity on that part).
    """
    classes = None if data.task == "regression" else data.num_classes
    scale = data.y_std if classes is None else 1.0
    y_train, y_test = data.y_train * scale, data.y_test * scale  # shifts cancel in the scores
    baseline_test = metrics.constant_log_likelihood(y_train, y_test, num_classes=classes)
    baseline_train = metrics.constant_log_likelihood(y_train, y_train, num_classes=classes)
    # The model's likelihood is of standardised targets: its Jacobian is 1 / y_std.
    train_ll = metrics.mean_log_predictive_density(result.log_likelihood) - np.log(scale)
    test_ll = out.metrics["test_ll"] if classes is None else -out.metrics["nll"]
    nonfinite = out.metrics.get("n_nonfinite_ll", out.metrics.get("n_nonfinite_nll", 0.0))
    out.metrics.update(
        baseline_test_ll=baseline_test, baseline_train_ll=baseline_train, train_ll=train_ll
    )
    checked_ll, checked_baseline, part = test_ll, baseline_test, None
    if "in" in out.regions:
        inside = data.test_inside
        checked_ll, part = out.metrics["test_ll_in"], out.regions["in"]
        checked_baseline = metrics.constant_log_likelihood(y_train, y_test[inside])
        out.metrics["baseline_test_ll_in"] = checked_baseline
    out.flags = metrics.usability_flags(
        test_ll=checked_ll,
        baseline_test_ll=checked_baseline,
        train_ll=train_ll,
        baseline_train_ll=baseline_train,
        nonfinite_test_points=int(nonfinite),
        num_test_points=data.n_test,
        test_part=part,
    )


def _classification(result: FitResult, data: Dataset, out: Evaluation) -> np.ndarray:
    probs = result.predict(data.x_test).draws
    ood = None if data.x_ood is None else result.predict(data.x_ood).draws
    out.metrics.update(metrics.classification_metrics(probs, data.y_test, ood_probs_draws=ood))
    mean_probs = probs.mean(axis=0)
    out.curves["reliability"] = metrics.reliability_diagram(mean_probs, data.y_test)
    out.curves["refuse"] = metrics.refuse_curve(mean_probs, data.y_test)
    out.predictions.update(
        {
            "test_y": (("test",), data.y_test),
            "test_mean_probs": (("test", "class"), mean_probs),
            "test_entropy": (("test",), metrics.predictive_entropy(mean_probs)),
        }
    )
    if ood is not None:
        out.predictions["ood_entropy"] = (("ood",), metrics.predictive_entropy(ood.mean(axis=0)))
        _refusals(result, data, mean_probs, ood.mean(axis=0), out)
    # A scalar per draw and point for chain diagnostics: the probability of the predicted class.
    predicted = mean_probs.argmax(axis=-1)
    return np.take_along_axis(probs, predicted[None, :, None], axis=-1)[..., 0]


def noise_inputs(data: Dataset) -> np.ndarray:
    """Uniform-noise inputs shaped like ``data.x_ood`` (flat rows or images) on the range of the
    preprocessed training inputs, each value U(min x_train, max x_train) (for image sets, pixels
    in [0, 1]); drawn with :data:`NOISE_SEED`, so every cell sees the same ones."""
    if data.x_ood is None:
        raise ValueError(f"{data.name} has no OOD inputs to shape the noise like")
    rng = np.random.default_rng(NOISE_SEED)
    low, high = float(np.min(data.x_train)), float(np.max(data.x_train))
    return rng.uniform(low, high, size=data.x_ood.shape)


def _refusals(
    result: FitResult,
    data: Dataset,
    test_probs: np.ndarray,
    ood_probs: np.ndarray,
    out: Evaluation,
) -> None:
    """Refusal rates at :data:`REFUSE_BELOW` on the test, OOD and uniform-noise inputs, and
    the largest class probability of every OOD and noise input (stored for the report)."""
    noise_probs = result.predict(noise_inputs(data)).draws.mean(axis=0)
    for name, probs in (("test", test_probs), ("ood", ood_probs), ("noise", noise_probs)):
        out.metrics[f"refused_{name}"] = metrics.refusal_rate(probs, REFUSE_BELOW)
    out.metrics["noise_mean_entropy"] = float(np.mean(metrics.predictive_entropy(noise_probs)))
    out.predictions.update(
        {
            "ood_p_max": (("ood",), ood_probs.max(axis=-1)),
            "noise_p_max": (("noise",), noise_probs.max(axis=-1)),
            "noise_entropy": (("noise",), metrics.predictive_entropy(noise_probs)),
        }
    )


def _sampler(result: FitResult, per_draw: np.ndarray, out: Evaluation) -> None:
    chains = per_draw.reshape(result.num_chains, result.num_draws, -1)
    if result.num_draws >= 4:
        out.metrics.update(metrics.prediction_diagnostics(chains))
    stats = metrics.sampler_diagnostics(
        result.sample_stats, max_tree_depth=result.options.get("max_tree_depth")
    )
    out.metrics.update(stats)
    seconds = result.timings.get("warmup", 0.0) + result.timings.get("sampling", 0.0)
    cost = metrics.cost_metrics(
        seconds=seconds,
        ess=out.metrics.get("ess_bulk_median"),
        num_grads=stats.get("num_grads"),
    )
    if "num_grads" in stats and stats["num_grads"] > 0:
        # Gradient counts come from the sampling phase only, so time that phase alone.
        cost["s_per_grad"] = result.timings["sampling"] / stats["num_grads"]
    out.metrics.update(cost)


def _optimisation_steps(method: Method, result: FitResult) -> int | None:
    """Optimiser or SG-MCMC steps taken, where the method has a fixed step count: all of an
    optimisation's (over every member of an ensemble) and an SG-MCMC run's; none for NUTS or HMC,
    whose leapfrog steps per draw are counted as gradients instead."""
    options = make_options(method, result.options)  # stored with every field filled in
    if isinstance(options, SGMCMCOptions):
        return options.num_steps
    if method.family is Family.MARKOV_CHAIN:
        return None
    steps = getattr(options, "num_steps", None)
    return None if steps is None else steps * getattr(options, "num_members", 1)


def _pruning(result: FitResult, data: Dataset, out: Evaluation) -> None:
    """Test quality after zeroing the weights with the smallest |mu| / sigma (Blundell et al.
    2015, Table 2), using the guide's own draws with those weights set to 0."""
    if result.variational is None:
        return
    sites = weight_sites(result.spec)
    snr = {
        name: np.abs(result.variational["loc"][name]).reshape(shape)
        / np.asarray(result.variational["scale"][name]).reshape(shape)
        for name, shape in sites.items()
    }
    all_snr = np.concatenate([v.ravel() for v in snr.values()])
    keep = evenly(result.num_draws, STORED_DRAWS)
    base = {k: v[:, keep] for k, v in result.draws.items()}
    curve: dict[str, list[float]] = {"fraction": [], "test_ll": []}
    quality = "rmse" if data.task == "regression" else "accuracy"
    curve[quality] = []
    for fraction in PRUNE_FRACTIONS:
        threshold = np.quantile(all_snr, fraction) if fraction > 0 else -np.inf
        draws = {
            k: (np.where(snr[k] > threshold, v, 0.0).astype(v.dtype) if k in snr else v)
            for k, v in base.items()
        }
        pred = predictive_at(
            result.backend, result.spec, draws, data.x_test, linearised_at=result.linearised_at
        )
        if data.task == "regression":
            f, sigma = _original_units(pred, data)
            y = data.y_test * data.y_std + data.y_mean
            ll, _ = metrics.test_log_likelihood(f, sigma, y)
            score = metrics.rmse(f.mean(axis=0), y)
        else:
            ll = -metrics.nll(pred.draws, data.y_test)
            score = metrics.accuracy(pred.draws.mean(axis=0), data.y_test)
        curve["fraction"].append(fraction)
        curve["test_ll"].append(float(ll))
        curve[quality].append(float(score))
    out.curves["pruning"] = curve


def _training(result: FitResult, data: Dataset, out: Evaluation) -> None:
    """The fit's training curve (:mod:`ppl_bnn.methods.curves`) as ``curves["training"]``: the
    ELBO split per checkpoint (nats of the model's standardised targets, as the ELBO is) and the
    held-out log-likelihood on the test set (``held_out = "test"``; the worker passes it, for
    display only), in original units as ``test_ll`` is."""
    curve = result.info.get(CURVE_KEY)
    if not curve:
        return
    keys = ("step", "loss", "expected_log_lik", "kl", "kl_checkpoint", "kl_weight")
    training = {k: curve[k] for k in keys if k in curve}
    if "held_out_ll" in curve:
        shift = np.log(data.y_std) if data.task == "regression" else 0.0
        training["held_out_ll"] = [float(v - shift) for v in curve["held_out_ll"]]
        training["held_out"] = "test"
    out.curves["training"] = training


def evaluate(
    result: FitResult,
    data: Dataset,
    *,
    stored_draws: int = STORED_DRAWS,
    fidelity_draws: int = FIDELITY_DRAWS,
) -> Evaluation:
    """Metrics, curves and predictions of ``result`` on ``data``'s test set (original units);
    regression keeps ``stored_draws`` draws of the test predictive, thinned evenly, and
    ``fidelity_draws`` at the points fidelity to a reference is measured on (a reference keeps
    :data:`~ppl_bnn.metrics.reference.FIDELITY_REFERENCE_DRAWS`)."""
    out = Evaluation()
    start = now()
    if data.task == "regression":
        per_draw = _regression(result, data, out, stored_draws, fidelity_draws)
    else:
        per_draw = _classification(result, data, out)
    _usability(result, data, out)
    predicted = now()
    method = get_method(result.method, result.backend)
    if method.family is Family.MARKOV_CHAIN:
        _sampler(result, per_draw, out)
    steps = _optimisation_steps(method, result)
    if steps:
        seconds = result.timings.get("warmup", 0.0) + result.timings.get("sampling", 0.0)
        out.metrics["s_per_step"] = seconds / steps
    if result.method == "svi":
        _pruning(result, data, out)
    _training(result, data, out)
    if result.losses is not None:
        losses = np.asarray(result.losses, dtype=np.float64)
        dims = ("step",) if losses.ndim == 1 else ("member", "step")
        out.predictions["loss"] = (dims, losses)
    out.timings = {"predict": predicted - start, "metrics": now() - predicted}
    logger.debug("evaluated %s/%s in %.2fs", result.method, result.backend, now() - start)
    return out


def predictions_dataset(evaluation: Evaluation, attrs: dict[str, Any]) -> Any:
    """The stored predictions as an ``xarray.Dataset`` (written to ``predictions.nc``)."""
    import xarray as xr

    return xr.Dataset(
        {name: (dims, np.asarray(v)) for name, (dims, v) in evaluation.predictions.items()},
        attrs=attrs,
    )
