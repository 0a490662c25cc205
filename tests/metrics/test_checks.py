"""Invalid input to the metrics raises ``ValueError`` naming the argument."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppl_bnn import metrics

F = np.zeros((2, 3))
SIG = np.ones(2)
Y = np.zeros(3)
P3 = np.full((2, 3, 2), 0.5)
P2 = np.full((3, 2), 0.5)
YC = np.array([0, 1, 0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: metrics.rmse([0.0, 1.0], [0.0]), "y must have length 2"),
        (lambda: metrics.rmse([[0.0]], [0.0]), "mean must be 1-D"),
        (lambda: metrics.log_predictive_density(np.zeros(3), SIG, Y), "f must be 2-D"),
        (lambda: metrics.log_predictive_density(F, np.ones(3), Y), r"sigma must have shape"),
        (lambda: metrics.log_predictive_density(F, np.ones((2, 2)), Y), r"sigma must have"),
        (lambda: metrics.log_predictive_density(F, np.array([1.0, 0.0]), Y), "sigma must be > 0"),
        (lambda: metrics.log_predictive_density(F, -SIG, Y), "sigma must be > 0"),
        (lambda: metrics.test_log_likelihood(F, SIG, np.zeros(4)), "y must have length 3"),
        (lambda: metrics.test_log_likelihood(F, SIG, [0.0, np.nan, 0.0]), "y contains NaN"),
        (lambda: metrics.crps(F, SIG, [0.0, np.inf, 0.0]), "y contains inf"),
        (lambda: metrics.crps(np.zeros((2, 0)), SIG, []), "f must not be empty"),
        (lambda: metrics.mixture_cdf(F, SIG, np.zeros(4)), "t must have last axis"),
        (lambda: metrics.mixture_quantiles(F, SIG, [0.0, 0.5]), r"probs must be in \(0, 1\)"),
        (lambda: metrics.mixture_quantiles(F, SIG, [1.0]), r"probs must be in \(0, 1\)"),
        (lambda: metrics.interval_coverage(F, SIG, Y, levels=(0.5, 1.2)), "levels must be in"),
        (lambda: metrics.interval_coverage(F, SIG, Y, levels=(np.nan,)), "levels must be in"),
        (lambda: metrics.regression_metrics(F, SIG, Y, levels=(0.9, 0.901)), "distinct"),
        (lambda: metrics.regression_metrics(F, SIG, Y, levels=(0.0,)), "levels must be in"),
        (lambda: metrics.calibration_curve(F, SIG, Y, levels=[]), "levels must not be empty"),
        (lambda: metrics.accuracy(P2[:2], YC), "y must have length 2"),
        (lambda: metrics.accuracy(P2, [0, 1, 2]), r"class labels in \[0, 2\)"),
        (lambda: metrics.accuracy(P2, [0, -1, 0]), r"class labels in \[0, 2\)"),
        (lambda: metrics.accuracy(P2, [0.0, np.nan, 0.0]), "y contains NaN"),
        (lambda: metrics.accuracy(P2, [0.0, 0.5, 0.0]), "y must be integer class labels"),
        (lambda: metrics.accuracy(P2, ["a", "b", "c"]), "y must be integer class labels"),
        (lambda: metrics.accuracy(P3, YC), "mean_probs must be 2-D"),
        (lambda: metrics.brier(np.array([[1.2, -0.2]] * 3), YC), r"must lie in \[0, 1\]"),
        (lambda: metrics.brier(np.array([[0.5, 0.49]] * 3), YC), "must sum to 1"),
        (lambda: metrics.nll(P2, YC), "probs_draws must be 3-D"),
        (lambda: metrics.nll(P3, [0, 1]), "y must have length 3"),
        (lambda: metrics.nll(P3 * 1.1, YC), r"probs_draws must lie in \[0, 1\]|must sum to 1"),
        (lambda: metrics.expected_calibration_error(P2, YC, num_bins=0), "num_bins must be"),
        (lambda: metrics.reliability_diagram(P2, YC, num_bins=2.5), "num_bins must be"),
        (lambda: metrics.classification_metrics(P3, YC, num_bins=True), "num_bins must be"),
        (
            lambda: metrics.classification_metrics(
                P3, YC, ood_probs_draws=np.full((2, 3, 3), 1 / 3)
            ),
            "ood_probs_draws must have 2 classes",
        ),
        (lambda: metrics.predictive_entropy(np.array([[0.7, 0.7]])), "must sum to 1"),
        (lambda: metrics.auroc([], [1.0]), "scores_negative must not be empty"),
        (lambda: metrics.auroc([0.0], [[1.0]]), "scores_positive must be 1-D"),
        (lambda: metrics.refuse_curve(P2, YC, thresholds=[0.5, 1.5]), r"thresholds must be in"),
        (lambda: metrics.agreement(P2, P2[:2]), "must have the same shape"),
        (lambda: metrics.total_variation(P2, np.full((3, 3), 1 / 3)), "must have the same shape"),
        (
            lambda: metrics.reference_metrics_classification(P3, np.full((2, 4, 2), 0.5)),
            "must agree in points and classes",
        ),
        (lambda: metrics.mixture_w2(F, SIG, np.zeros((2, 4)), SIG), "same number of points"),
        (lambda: metrics.mixture_ks(F, SIG, F, np.zeros(2)), "sigma_ref must be > 0"),
        (lambda: metrics.mixture_w2(F, SIG, F, SIG, num_quantiles=0), "num_quantiles must be"),
        (lambda: metrics.reference_metrics_regression(F, SIG, F[:, :2], SIG), "same number"),
        (lambda: metrics.prediction_diagnostics(np.zeros((4, 10))), "draws must be 3-D"),
        (lambda: metrics.prediction_diagnostics(np.zeros((2, 3, 4))), "at least 4 draws"),
        (lambda: metrics.prediction_diagnostics(np.zeros((1, 7, 4))), "at least 8 draws"),
        (
            lambda: metrics.sampler_diagnostics({"diverging": np.zeros(5)}),
            r"sample_stats\['diverging'\] must be 2-D",
        ),
        (
            lambda: metrics.sampler_diagnostics({"energy": np.zeros((2, 1))}),
            "at least 2 draws",
        ),
        (
            lambda: metrics.sampler_diagnostics({}, max_tree_depth=0),
            "max_tree_depth must be an integer",
        ),
        (lambda: metrics.cost_metrics(seconds=-1.0), "seconds must be finite and >= 0"),
        (lambda: metrics.cost_metrics(seconds=math.inf), "seconds must be finite"),
        (lambda: metrics.cost_metrics(seconds=1.0, ess=-5.0), "ess must be finite and >= 0"),
        (lambda: metrics.cost_metrics(seconds=1.0, num_grads=math.nan), "num_grads must be"),
        (lambda: metrics.cost_metrics(seconds="1"), "seconds must be a number"),
    ],
)
def test_invalid_input_raises(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]
