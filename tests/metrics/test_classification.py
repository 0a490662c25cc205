"""Classification metrics against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppl_bnn import metrics
from tests.metrics.conftest import LABELS, MEAN_PROBS


def test_accuracy_and_brier_by_hand() -> None:
    assert metrics.accuracy(MEAN_PROBS, LABELS) == 0.75
    # per point: 2 * 0.1^2, 2 * 0.55^2, 2 * 0.3^2, 2 * 0.25^2
    assert metrics.brier(MEAN_PROBS, LABELS) == pytest.approx((0.02 + 0.605 + 0.18 + 0.125) / 4)


def test_ece_and_reliability_diagram_by_hand() -> None:
    # 5 bins: (0.4, 0.6] {0.55 wrong}, (0.6, 0.8] {0.7, 0.75 right}, (0.8, 1] {0.9 right}.
    expected = (abs(0 - 0.55) + 2 * abs(1 - 0.725) + abs(1 - 0.9)) / 4
    assert metrics.expected_calibration_error(MEAN_PROBS, LABELS, num_bins=5) == pytest.approx(
        expected
    )
    diagram = metrics.reliability_diagram(MEAN_PROBS, LABELS, num_bins=5)
    assert diagram["count"] == [0, 0, 1, 2, 1]
    assert diagram["bin_lower"] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert diagram["bin_upper"] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(diagram["confidence"], [np.nan, np.nan, 0.55, 0.725, 0.9])
    np.testing.assert_allclose(diagram["accuracy"], [np.nan, np.nan, 0.0, 1.0, 1.0])
    # One bin: |mean accuracy - mean confidence| = |0.75 - 0.725|.
    assert metrics.expected_calibration_error(MEAN_PROBS, LABELS, num_bins=1) == pytest.approx(
        0.025
    )
    # Default 15 bins: every confidence alone in its bin.
    assert metrics.expected_calibration_error(MEAN_PROBS, LABELS) == pytest.approx(
        (0.1 + 0.55 + 0.3 + 0.25) / 4
    )


def test_ece_bins_are_closed_on_the_right() -> None:
    # Confidence 0.5 with 2 bins falls in (0, 0.5], as in Guo et al. (2017).
    diagram = metrics.reliability_diagram(np.array([[0.5, 0.5]]), np.array([0]), num_bins=2)
    assert diagram["count"] == [1, 0]


def test_nll_by_hand_and_zero_probability() -> None:
    probs = np.array(
        [
            [[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]],
            [[0.6, 0.4], [0.0, 1.0], [1.0, 0.0]],
        ]
    )
    y = np.array([1, 0, 1])
    # point 0: mean(0.8, 0.4); point 1: mean(0.5, 0) -- finite; point 2: probability 0 -> inf
    expected = (-math.log(0.6) - math.log(0.25)) / 2
    assert metrics.nll(probs, y) == pytest.approx(expected)
    out = metrics.classification_metrics(probs, y)
    assert out["nll"] == pytest.approx(expected)
    assert out["n_nonfinite_nll"] == 1


def test_nll_of_tiny_probabilities_is_not_floored() -> None:
    probs = np.array([[[1 - 1e-300, 1e-300]], [[1 - 1e-310, 1e-310]]])
    expected = -math.log((1e-300 + 1e-310) / 2)
    assert metrics.nll(probs, np.array([1])) == pytest.approx(expected)


def test_predictive_entropy_by_hand() -> None:
    probs = np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.25]])
    expected = [0.0, math.log(3), 0.5 * math.log(2) + 0.5 * math.log(4)]
    np.testing.assert_allclose(metrics.predictive_entropy(probs), expected, atol=1e-15)


def test_auroc_extremes_and_ties() -> None:
    assert metrics.auroc([0.1, 0.2], [0.3, 0.4, 0.5]) == 1.0
    assert metrics.auroc([0.3, 0.4, 0.5], [0.1, 0.2]) == 0.0
    assert metrics.auroc([1.0, 1.0], [1.0, 1.0, 1.0]) == 0.5
    # one tie among 2 x 2 pairs: (3 + 0.5) / 4
    assert metrics.auroc([0.0, 1.0], [1.0, 2.0]) == 0.875
    assert math.isnan(metrics.auroc([0.0, np.nan], [1.0]))


def test_auroc_matches_pairwise_count() -> None:
    rng = np.random.default_rng(6)
    neg = rng.integers(0, 6, size=40).astype(float)  # many ties
    pos = rng.integers(2, 8, size=30).astype(float)
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    expected = (greater + 0.5 * ties) / (pos.size * neg.size)
    assert metrics.auroc(neg, pos) == pytest.approx(expected, rel=1e-12)


def test_refuse_curve_by_hand() -> None:
    curve = metrics.refuse_curve(MEAN_PROBS, LABELS, thresholds=[0.0, 0.6, 0.8, 0.95])
    assert curve["threshold"] == [0.0, 0.6, 0.8, 0.95]
    assert curve["fraction_kept"] == [1.0, 0.75, 0.25, 0.0]
    np.testing.assert_allclose(curve["accuracy"], [0.75, 1.0, 1.0, np.nan])
    default = metrics.refuse_curve(MEAN_PROBS, LABELS)
    assert len(default["threshold"]) == 21


def test_classification_metrics_with_ood() -> None:
    probs = np.stack([MEAN_PROBS, MEAN_PROBS])
    ood = np.full((2, 3, 2), 0.5)  # uniform: maximal entropy, above every in-distribution point
    out = metrics.classification_metrics(probs, LABELS, ood_probs_draws=ood, num_bins=5)
    assert list(out) == [
        "accuracy",
        "nll",
        "n_nonfinite_nll",
        "brier",
        "ece",
        "mean_entropy",
        "ood_auroc",
        "ood_mean_entropy",
    ]
    assert out["accuracy"] == 0.75
    assert out["brier"] == pytest.approx(metrics.brier(MEAN_PROBS, LABELS))
    assert out["ece"] == pytest.approx(metrics.expected_calibration_error(MEAN_PROBS, LABELS, 5))
    assert out["mean_entropy"] == pytest.approx(metrics.predictive_entropy(MEAN_PROBS).mean())
    assert out["ood_auroc"] == 1.0
    assert out["ood_mean_entropy"] == pytest.approx(math.log(2))
    assert "ood_auroc" not in metrics.classification_metrics(probs, LABELS)


def test_nonfinite_probabilities_are_counted_not_rejected() -> None:
    probs = MEAN_PROBS.copy()
    probs[0] = np.nan  # a correct prediction before
    # No prediction for the NaN row: wrong, never kept, disagreeing.
    assert metrics.accuracy(probs, LABELS) == 0.5
    assert metrics.refuse_curve(probs, LABELS, thresholds=[0.0])["fraction_kept"] == [0.75]
    assert metrics.agreement(probs, probs) == 0.75
    assert math.isnan(metrics.expected_calibration_error(probs, LABELS))
    assert sum(metrics.reliability_diagram(probs, LABELS)["count"]) == 3


def test_refusal_rate_and_its_bad_thresholds() -> None:
    probs = np.array([[0.15, 0.85], [0.5, 0.5], [np.nan, 1.0]])
    assert metrics.refusal_rate(probs, 0.6) == pytest.approx(2 / 3)  # the NaN row is refused
    assert metrics.refusal_rate(probs, 0.5) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\]"):
        metrics.refusal_rate(probs, 1.5)
    with pytest.raises(TypeError, match="threshold must be a number"):
        metrics.refusal_rate(probs, "0.2")


def test_selective_curve_keeps_the_most_confident_first() -> None:
    # 40 inputs; the 30 most confident are right, the 10 least confident wrong.
    labels = np.arange(40) % 10
    confidence = np.linspace(0.2, 1.0, 40)
    probs = np.tile(((1 - confidence) / 9)[:, None], (1, 10))
    top = np.where(np.arange(40) >= 10, labels, (labels + 1) % 10)
    probs[np.arange(40), top] = confidence
    curve = metrics.selective_curve(probs[::-1], labels[::-1], num_points=4)
    assert curve["coverage"] == [0.25, 0.5, 0.75, 1.0]
    assert curve["accuracy"] == [1.0, 1.0, 1.0, 0.75]
    assert metrics.selective_curve(probs, labels, num_points=4) == curve  # order-free
    with pytest.raises(ValueError, match="num_points"):
        metrics.selective_curve(probs, labels, num_points=0)
