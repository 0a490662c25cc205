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


@pytest.mark.parametrize(("method", "points", "warns"), [
    ("map", 40, True), ("swag", 40, True), ("ensemble", 40, True), ("map", 100, False),
    ("laplace", 40, False), ("mcdropout", 40, False),
])  # fmt: skip
def test_a_method_that_predicts_near_modes_warns_on_few_points_per_weight(
    method, points, warns, caplog
) -> None:
    # 2 inputs, 5 units, 1 output: 21 weights, so 84 points are the threshold of 4 per weight.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(points, 2))
    model = BNN(x, x[:, 0], hidden=(5,), noise="learned")
    options = {"num_snapshots": 2, "rank": 2} if method == "swag" else {}
    with caplog.at_level("WARNING", logger="ppl_bnn.fit"):
        fit(model, method, seed=0, num_steps=5, **options)
    expected = f"{method}: {points} training points for 21 weights, fewer than 4 per weight"
    assert any(expected in r.getMessage() for r in caplog.records) == warns, caplog.text
