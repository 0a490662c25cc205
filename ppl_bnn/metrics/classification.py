"""Classification metrics of posterior predictive class probabilities.

Shapes: ``probs_draws`` (S, N, K) per-draw class probabilities, ``mean_probs`` (N, K) their mean
over draws, ``y`` (N,) integer labels.

Non-finite predictions are not an error: the NLL averages over the finite points and counts the
others; the other metrics say per function what they do (mostly: the result is NaN).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import entr, logsumexp
from scipy.stats import rankdata

from ppl_bnn.metrics import checks


def _confidence_and_prediction(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max probability and argmax per row (N,); NaN and -1 for rows with non-finite entries."""
    finite = np.isfinite(p).all(axis=-1)
    safe = np.where(finite[:, None], p, 0.0)
    conf = np.where(finite, safe.max(axis=-1), np.nan)
    pred = np.where(finite, safe.argmax(axis=-1), -1)
    return conf, pred


def _mean_probs_and_labels(mean_probs: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p = checks.probs(mean_probs, "mean_probs", 2)
    return p, checks.labels(y, p.shape[0], p.shape[1])


def accuracy(mean_probs: ArrayLike, y: ArrayLike) -> float:
    """Fraction of points whose most probable class is the label.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).

    Returns:
        Accuracy; a row with non-finite probabilities has no prediction and counts as wrong.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    return float(np.mean(_confidence_and_prediction(p)[1] == labels))


def _nll_points(p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    picked = p[:, np.arange(p.shape[1]), labels]
    with np.errstate(all="ignore"):
        return -(logsumexp(np.log(picked), axis=0) - math.log(p.shape[0]))


def nll(probs_draws: ArrayLike, y: ArrayLike) -> float:
    r"""Mean negative log predictive probability of the label over the finite points.

    :math:`-\log \frac1S \sum_s p_s(y_n \mid x_n)` per point, computed as log-mean-exp of
    :math:`\log p_s(y_n)` with no floor: a point whose label has probability exactly 0 under every
    draw (or a NaN probability) is non-finite and left out of the mean; ``classification_metrics``
    reports their number as ``n_nonfinite_nll``.

    Args:
        probs_draws: Per-draw class probabilities (S, N, K).
        y: Labels (N,).

    Returns:
        Mean over finite points; NaN if no point is finite.
    """
    p = checks.probs(probs_draws, "probs_draws", 3)
    labels = checks.labels(y, p.shape[1], p.shape[2])
    return checks.finite_mean(_nll_points(p, labels))[0]


def brier(mean_probs: ArrayLike, y: ArrayLike) -> float:
    r"""Brier score :math:`\frac1N\sum_n\sum_k (p_{nk} - 1[y_n = k])^2` (Brier 1950).

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).

    Returns:
        Mean score (NaN if a probability is non-finite); lower is better.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    onehot = np.eye(p.shape[1])[labels]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def _bin_edges(num_bins: int) -> np.ndarray:
    return np.linspace(0.0, 1.0, num_bins + 1)


def _bins(conf: np.ndarray, correct: np.ndarray, num_bins: int) -> tuple[np.ndarray, ...]:
    """Count, summed confidence and summed correctness per bin ``(lower, upper]`` (0 in bin 0)."""
    idx = np.clip(np.searchsorted(_bin_edges(num_bins), conf, side="left") - 1, 0, num_bins - 1)
    count = np.bincount(idx, minlength=num_bins)
    sum_conf = np.bincount(idx, weights=conf, minlength=num_bins)
    sum_correct = np.bincount(idx, weights=correct.astype(np.float64), minlength=num_bins)
    return count, sum_conf, sum_correct


def expected_calibration_error(mean_probs: ArrayLike, y: ArrayLike, num_bins: int = 15) -> float:
    r"""Expected calibration error (Guo et al. 2017, "On Calibration of Modern Neural Networks").

    With confidence :math:`c_n = \max_k p_{nk}` binned into ``num_bins`` equal-width bins
    :math:`B_b = ((b-1)/M, b/M]` of [0, 1]:
    :math:`\mathrm{ECE} = \sum_b \frac{|B_b|}{N} |\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|`.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).
        num_bins: Number of bins (>= 1).

    Returns:
        ECE in [0, 1]; NaN if a probability is non-finite.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    bins = checks.positive_int(num_bins, "num_bins")
    conf, pred = _confidence_and_prediction(p)
    if np.isnan(conf).any():
        return math.nan
    _, sum_conf, sum_correct = _bins(conf, pred == labels, bins)
    return float(np.sum(np.abs(sum_correct - sum_conf)) / conf.size)


def reliability_diagram(
    mean_probs: ArrayLike, y: ArrayLike, num_bins: int = 15
) -> dict[str, list[Any]]:
    """Per-bin mean confidence and accuracy, the bins of :func:`expected_calibration_error`.

    Args:
        mean_probs: Predictive class probabilities (N, K); rows with non-finite entries are left
            out.
        y: Labels (N,).
        num_bins: Number of bins (>= 1).

    Returns:
        ``{"bin_lower", "bin_upper", "confidence", "accuracy", "count"}``, one entry per bin; an
        empty bin has count 0 and NaN confidence and accuracy.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    bins = checks.positive_int(num_bins, "num_bins")
    conf, pred = _confidence_and_prediction(p)
    keep = np.isfinite(conf)
    count, sum_conf, sum_correct = _bins(conf[keep], pred[keep] == labels[keep], bins)
    with np.errstate(all="ignore"):
        mean_conf = np.where(count > 0, sum_conf / count, np.nan)
        mean_acc = np.where(count > 0, sum_correct / count, np.nan)
    edges = _bin_edges(bins)
    return {
        "bin_lower": edges[:-1].tolist(),
        "bin_upper": edges[1:].tolist(),
        "confidence": mean_conf.tolist(),
        "accuracy": mean_acc.tolist(),
        "count": count.tolist(),
    }


def predictive_entropy(mean_probs: ArrayLike) -> np.ndarray:
    r"""Entropy of the predictive, :math:`H_n = -\sum_k p_{nk} \log p_{nk}` (nats, 0 log 0 = 0).

    Args:
        mean_probs: Predictive class probabilities (N, K).

    Returns:
        (N,) entropies; NaN for rows with a NaN probability.
    """
    p = checks.probs(mean_probs, "mean_probs", 2)
    return entr(p).sum(axis=-1)


def auroc(scores_negative: ArrayLike, scores_positive: ArrayLike) -> float:
    r"""Area under the ROC curve where positives should score higher.

    The Mann-Whitney statistic (Hanley & McNeil 1982):
    :math:`\frac{1}{n_+ n_-}\sum_{i \in +}\sum_{j \in -} (1[s_i > s_j] + \tfrac12 1[s_i = s_j])`,
    computed from average ranks in O(n log n). For OOD detection by entropy:
    ``auroc(entropy(in-distribution test), entropy(OOD))``.

    Args:
        scores_negative: Scores of the negatives (n_-,).
        scores_positive: Scores of the positives (n_+,).

    Returns:
        AUROC in [0, 1] (0.5: no separation); NaN if a score is NaN.
    """
    neg = checks.float_array(scores_negative, "scores_negative", (1,))
    pos = checks.float_array(scores_positive, "scores_positive", (1,))
    if np.isnan(neg).any() or np.isnan(pos).any():
        return math.nan
    ranks = rankdata(np.concatenate([neg, pos]))
    u_stat = ranks[neg.size :].sum() - pos.size * (pos.size + 1) / 2.0
    return float(u_stat / (pos.size * neg.size))


def refuse_curve(
    mean_probs: ArrayLike,
    y: ArrayLike,
    thresholds: ArrayLike = np.linspace(0.0, 1.0, 21),  # noqa: B008 (read-only default)
) -> dict[str, list[float]]:
    """Accuracy when refusing to predict below a confidence threshold.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).
        thresholds: Confidence thresholds t in [0, 1].

    Returns:
        ``{"threshold", "fraction_kept", "accuracy"}``: per t, the fraction of points with
        ``max_k p_k >= t`` and the accuracy on them (NaN if none is kept). Rows with non-finite
        probabilities are never kept.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    t = checks.float_array(thresholds, "thresholds", (1,))
    if not np.all((t >= 0) & (t <= 1)):
        raise ValueError(f"thresholds must be in [0, 1], got {t.tolist()}")
    conf, pred = _confidence_and_prediction(p)
    correct = pred == labels
    kept = conf[None, :] >= t[:, None]
    num_kept = kept.sum(axis=1)
    with np.errstate(all="ignore"):
        acc = np.where(num_kept > 0, (kept & correct).sum(axis=1) / num_kept, np.nan)
    return {
        "threshold": t.tolist(),
        "fraction_kept": (num_kept / labels.size).tolist(),
        "accuracy": acc.tolist(),
    }


def refusal_rate(mean_probs: ArrayLike, threshold: float = 0.2) -> float:
    """Share of inputs refused: those whose largest predictive probability is below
    ``threshold``, :math:`\\frac1N \\sum_n [\\max_k p_{nk} < t]` (rows with non-finite
    probabilities count as refused).

    Args:
        mean_probs: Predictive class probabilities (N, K).
        threshold: Confidence t in [0, 1]; 0.2 is twice chance for ten classes.
    """
    p = checks.probs(mean_probs, "mean_probs", 2)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise TypeError(f"threshold must be a number, got {threshold!r}")
    if not 0 <= threshold <= 1:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    conf, _ = _confidence_and_prediction(p)
    return float(np.mean(~(conf >= threshold)))


def selective_curve(
    mean_probs: ArrayLike, y: ArrayLike, num_points: int = 50
) -> dict[str, list[float]]:
    """Accuracy against coverage of selective classification (El-Yaniv & Wiener 2010): keep the
    fraction c of inputs with the largest :math:`\\max_k p_k` and score the kept ones.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).
        num_points: Coverages c = 1/num_points, ..., 1 (each keeps ceil(c N) >= 1 inputs).

    Returns:
        ``{"coverage", "accuracy"}``. Ties in confidence keep the earlier input; rows with
        non-finite probabilities come last and count as errors.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    num = checks.positive_int(num_points, "num_points")
    conf, pred = _confidence_and_prediction(p)
    order = np.argsort(-np.nan_to_num(conf, nan=-1.0), kind="stable")
    hits = np.cumsum(pred[order] == labels[order])
    coverage = np.arange(1, num + 1) / num
    kept = np.maximum(1, np.ceil(coverage * labels.size - 1e-9).astype(int))
    return {"coverage": coverage.tolist(), "accuracy": (hits[kept - 1] / kept).tolist()}


def classification_metrics(
    probs_draws: ArrayLike,
    y: ArrayLike,
    *,
    ood_probs_draws: ArrayLike | None = None,
    num_bins: int = 15,
) -> dict[str, float]:
    """All classification metrics of the design in one dict.

    Keys: ``accuracy``, ``nll``, ``n_nonfinite_nll``, ``brier``, ``ece`` and ``mean_entropy`` (mean
    predictive entropy); with ``ood_probs_draws``, ``ood_auroc`` (:func:`auroc` of the
    in-distribution entropies as negatives against the OOD entropies as positives) and
    ``ood_mean_entropy``. The predictive is the mean of ``probs_draws`` over draws.

    Args:
        probs_draws: Per-draw class probabilities (S, N, K).
        y: Labels (N,).
        ood_probs_draws: Per-draw class probabilities at out-of-distribution inputs (S', M, K).
        num_bins: ECE bins.
    """
    p = checks.probs(probs_draws, "probs_draws", 3)
    labels = checks.labels(y, p.shape[1], p.shape[2])
    bins = checks.positive_int(num_bins, "num_bins")
    mean_probs = p.mean(axis=0)
    nll_value, num_bad = checks.finite_mean(_nll_points(p, labels))
    entropy = entr(mean_probs).sum(axis=-1)
    out: dict[str, float] = {
        "accuracy": accuracy(mean_probs, labels),
        "nll": nll_value,
        "n_nonfinite_nll": num_bad,
        "brier": brier(mean_probs, labels),
        "ece": expected_calibration_error(mean_probs, labels, bins),
        "mean_entropy": float(np.mean(entropy)),
    }
    if ood_probs_draws is not None:
        ood = checks.probs(ood_probs_draws, "ood_probs_draws", 3)
        if ood.shape[2] != p.shape[2]:
            raise ValueError(
                f"ood_probs_draws must have {p.shape[2]} classes (as probs_draws), "
                f"got {ood.shape[2]}"
            )
        ood_entropy = entr(ood.mean(axis=0)).sum(axis=-1)
        out["ood_auroc"] = auroc(entropy, ood_entropy)
        out["ood_mean_entropy"] = float(np.mean(ood_entropy))
    return out
