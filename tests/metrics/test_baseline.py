"""The constant predictor, the mean log predictive density and the usability flags, against
hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from ppl_bnn import metrics


def test_constant_regression_is_the_training_gaussian() -> None:
    y_train = np.array([1.0, 2.0, 3.0, 6.0])
    y = np.array([0.0, 4.0])
    mean, std = 3.0, math.sqrt(((y_train - 3.0) ** 2).mean())  # ddof=0
    expected = np.mean(norm.logpdf(y, mean, std))
    assert metrics.constant_log_likelihood(y_train, y) == pytest.approx(expected, rel=1e-12)


def test_constant_classification_uses_smoothed_training_frequencies() -> None:
    y_train = np.array([0, 0, 0, 1])  # class 2 never seen: (0 + 1) / (4 + 3)
    y = np.array([0, 2])
    expected = (math.log(4 / 7) + math.log(1 / 7)) / 2
    assert metrics.constant_log_likelihood(y_train, y, num_classes=3) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("y_train", "y", "kwargs", "message"),
    [
        (np.ones(5), np.ones(2), {}, "y_train must not be constant"),
        (np.zeros((2, 2)), np.ones(2), {}, "y_train must be 1-D"),
        (
            np.array([0, 1]),
            np.array([3]),
            {"num_classes": 2},
            r"y must be class labels in \[0, 2\)",
        ),
        (np.array([0, 1]), np.array([1]), {"num_classes": 0}, "num_classes"),
    ],
)
def test_constant_bad_input(y_train, y, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        metrics.constant_log_likelihood(y_train, y, **kwargs)


def test_mean_log_predictive_density_is_log_mean_exp_over_draws() -> None:
    ll = np.log(np.array([[[0.2, 0.5]], [[0.4, 0.1]]]))  # (chain 2, draw 1, point 2)
    expected = (math.log(0.3) + math.log(0.3)) / 2
    assert metrics.mean_log_predictive_density(ll) == pytest.approx(expected)
    ll[0, 0, 1] = np.nan
    assert math.isnan(metrics.mean_log_predictive_density(ll))


def test_usability_flags_name_every_reason() -> None:
    good = metrics.usability_flags(
        test_ll=-1.0, baseline_test_ll=-2.0, train_ll=-0.5, baseline_train_ll=-1.9
    )
    assert good == []
    bad = metrics.usability_flags(
        test_ll=-3.0,
        baseline_test_ll=-2.0,
        train_ll=float("nan"),
        baseline_train_ll=-1.9,
        nonfinite_test_points=4,
        num_test_points=100,
    )
    assert bad == [
        "test log-likelihood -3 is below the constant predictor's -2",
        "training log-likelihood nan is below the constant predictor's -1.9",
        "log-likelihood not finite at 4 of 100 test points",
    ]
    part = metrics.usability_flags(
        test_ll=-3.0, baseline_test_ll=-2.0, train_ll=-0.5, baseline_train_ll=-1.9,
        test_part="in range",
    )  # fmt: skip
    assert part == ["test log-likelihood (in range) -3 is below the constant predictor's -2"]
