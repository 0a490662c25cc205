"""The baselines called as a user first calls them, ``fit(model, method)`` with every option at
its default, on a small standardised regression set with the noise learned and a small
classification set: a default that diverges is a bug (``benchmarks/defaults_audit.py`` is the
full audit, on the UCI sets)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_digits

from ppl_bnn import BNN, fit

BASELINES = ("map", "laplace", "swag", "mcdropout", "ensemble")


def _regression() -> tuple[BNN, np.ndarray]:
    x, y = load_diabetes(return_X_y=True)
    x, y = (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()
    return BNN(x[:350], y[:350], hidden=(50,), noise="learned"), x[350:]


def _classification() -> tuple[BNN, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    return BNN(x[:300], y[:300], hidden=(20,), likelihood="categorical"), x[300:400]


@pytest.mark.parametrize("problem", [_regression, _classification], ids=["regression", "digits"])
@pytest.mark.parametrize("method", BASELINES)
def test_a_baseline_with_its_defaults_does_not_diverge(problem, method) -> None:
    model, x_test = problem()
    result = fit(model, method, seed=0)
    prediction = result.predict(x_test)
    if model.spec.likelihood == "gaussian":
        assert np.all(np.isfinite(prediction.mean)) and np.all(np.isfinite(prediction.std))
    else:
        probs = prediction.probs
        assert np.all(np.isfinite(probs)) and np.allclose(probs.sum(-1), 1.0, atol=1e-5)
