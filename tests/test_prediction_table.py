"""prediction_table: a predictive written one row per input, against hand computations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ppl_bnn import BNNSpec, Prediction
from ppl_bnn.prediction_table import prediction_columns, prediction_table

REGRESSION = BNNSpec.mlp(input_dim=1, hidden=(), noise="learned")
CLASSIFICATION = BNNSpec.mlp(input_dim=1, hidden=(), likelihood="categorical", num_classes=3)
F_REG = np.array([[[1.0], [-1.0]], [[2.0], [0.0]], [[4.0], [0.5]]], dtype=np.float32)
SIGMA = np.array([0.5, 1.0, 2.0])
F_CLS = np.array(
    [[[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]], [[1.0, 1.0, 1.0], [-1.0, 2.0, 0.5]]], dtype=np.float32
)


def test_regression_rows_hold_mean_std_and_the_mixtures_central_interval() -> None:
    pred = Prediction(spec=REGRESSION, f=F_REG, noise_std=SIGMA)
    table = prediction_table(pred, "price", level=0.9)
    assert list(table.columns) == ["price_mean", "price_std", "price_lower_90", "price_upper_90"]
    np.testing.assert_allclose(table["price_mean"], pred.mean)
    np.testing.assert_allclose(table["price_std"], pred.std)
    # The interval's ends hold 5% of the equally weighted mixture below and above.
    f = F_REG[..., 0].astype(np.float64)
    below = stats.norm.cdf(table["price_lower_90"].to_numpy(), f, SIGMA[:, None]).mean(axis=0)
    above = stats.norm.sf(table["price_upper_90"].to_numpy(), f, SIGMA[:, None]).mean(axis=0)
    np.testing.assert_allclose(below, 0.05, atol=1e-7)
    np.testing.assert_allclose(above, 0.05, atol=1e-7)


def test_classification_rows_hold_the_most_probable_label_and_every_probability() -> None:
    pred = Prediction(spec=CLASSIFICATION, f=F_CLS, noise_std=None)
    table = prediction_table(pred, "kind", ["blue", "green", "red"])
    assert list(table.columns) == prediction_columns("kind", ["blue", "green", "red"])
    assert list(table.columns) == ["kind_predicted", "p(kind=blue)", "p(kind=green)", "p(kind=red)"]
    np.testing.assert_allclose(table.iloc[:, 1:].to_numpy(), pred.probs)
    assert table["kind_predicted"].tolist() == ["red", "blue"]


@pytest.mark.parametrize(
    ("spec", "f", "noise", "classes", "level", "match"),
    [
        (REGRESSION, F_REG, SIGMA, None, 1.0, r"level must lie in \(0, 1\), got 1.0"),
        (REGRESSION, F_REG, SIGMA, ["a", "b"], 0.95, "a regression predictive was given classes"),
        (CLASSIFICATION, F_CLS, None, None, 0.95, "a classification predictive was given no cl"),
        (CLASSIFICATION, F_CLS, None, ["a", "b"], 0.95, "2 class names for 3 classes"),
    ],
)  # fmt: skip
def test_bad_requests_are_refused(
    spec: BNNSpec, f: np.ndarray, noise: np.ndarray | None, classes: list[str] | None,
    level: float, match: str,
) -> None:  # fmt: skip
    with pytest.raises(ValueError, match=match):
        prediction_table(Prediction(spec=spec, f=f, noise_std=noise), "y", classes, level)
