"""Prediction: posterior predictive summaries against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ppl_bnn import BNNSpec, Prediction

REGRESSION = BNNSpec.mlp(input_dim=1, hidden=(), noise="learned")
CLASSIFICATION = BNNSpec.mlp(input_dim=1, hidden=(), likelihood="categorical", num_classes=3)

# Three draws at two points: f[s, n, 0].
F_REG = np.array([[[1.0], [-1.0]], [[2.0], [0.0]], [[4.0], [0.5]]], dtype=np.float32)
SIGMA = np.array([0.5, 1.0, 2.0])
Y_REG = np.array([1.5, -0.5])

# Two draws at two points, three classes: logits f[s, n, k].
F_CLS = np.array(
    [[[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]], [[1.0, 1.0, 1.0], [-1.0, 2.0, 0.5]]], dtype=np.float32
)
Y_CLS = np.array([2, 1])


@pytest.fixture
def reg() -> Prediction:
    return Prediction(spec=REGRESSION, f=F_REG, noise_std=SIGMA)


@pytest.fixture
def cls() -> Prediction:
    return Prediction(spec=CLASSIFICATION, f=F_CLS, noise_std=None)


# --- regression ---------------------------------------------------------------------------------


def test_mean(reg: Prediction) -> None:
    np.testing.assert_allclose(reg.mean, [7.0 / 3.0, -0.5 / 3.0], rtol=1e-6)
    assert reg.mean.shape == (2,)


def test_epistemic_std(reg: Prediction) -> None:
    # Population std (ddof=0) over draws.
    m0, m1 = 7.0 / 3.0, -0.5 / 3.0
    v0 = ((1 - m0) ** 2 + (2 - m0) ** 2 + (4 - m0) ** 2) / 3
    v1 = ((-1 - m1) ** 2 + (0 - m1) ** 2 + (0.5 - m1) ** 2) / 3
    np.testing.assert_allclose(reg.epistemic_std, [math.sqrt(v0), math.sqrt(v1)], rtol=1e-6)


def test_total_std_adds_mean_noise_variance(reg: Prediction) -> None:
    noise_var = (0.25 + 1.0 + 4.0) / 3
    f = F_REG[..., 0].astype(np.float64)
    expected = np.sqrt(f.var(axis=0) + noise_var)
    np.testing.assert_allclose(reg.std, expected, rtol=1e-6)
    assert np.all(reg.std > reg.epistemic_std)


def test_draws_regression(reg: Prediction) -> None:
    np.testing.assert_array_equal(reg.draws, F_REG[..., 0])


def test_log_predictive_density_regression(reg: Prediction) -> None:
    expected = []
    for n in range(2):
        dens = [stats.norm.pdf(Y_REG[n], F_REG[s, n, 0], SIGMA[s]) for s in range(3)]
        expected.append(math.log(sum(dens) / 3))
    np.testing.assert_allclose(reg.log_predictive_density(Y_REG), expected, rtol=1e-6)
    assert reg.mean_log_predictive_density(Y_REG) == pytest.approx(np.mean(expected), rel=1e-6)


def test_log_likelihood_is_not_clipped_far_from_data(reg: Prediction) -> None:
    y = np.array([60.0, -60.0])
    ll = reg.log_predictive_density(y)
    assert np.all(np.isfinite(ll))
    # The widest component (sigma=2) dominates: log N(60 | 4, 2) - log 3, plus the rest.
    expected0 = stats.norm.logpdf(60.0, 4.0, 2.0) - math.log(3)
    assert ll[0] == pytest.approx(expected0, rel=1e-6)
    assert ll[0] < -300


def test_regression_log_likelihood_accepts_list(reg: Prediction) -> None:
    assert reg.mean_log_predictive_density(list(Y_REG)) == pytest.approx(
        reg.mean_log_predictive_density(Y_REG)
    )


def test_probs_raises_for_regression(reg: Prediction) -> None:
    with pytest.raises(ValueError, match="probs is defined for classification"):
        _ = reg.probs


@pytest.mark.parametrize("n", [1, 3])
def test_wrong_length_y_regression(reg: Prediction, n: int) -> None:
    with pytest.raises(ValueError, match=rf"y has {n} entries but x has 2 rows"):
        reg.mean_log_predictive_density(np.zeros(n))


def test_non_finite_y_regression(reg: Prediction) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        reg.mean_log_predictive_density(np.array([0.0, np.nan]))


def test_known_noise_broadcasts() -> None:
    spec = BNNSpec.mlp(input_dim=1, hidden=(), noise=0.5)
    pred = Prediction(spec=spec, f=F_REG, noise_std=np.full(3, 0.5))
    f = F_REG[..., 0].astype(np.float64)
    np.testing.assert_allclose(pred.std, np.sqrt(f.var(axis=0) + 0.25), rtol=1e-6)


# --- classification -----------------------------------------------------------------------------


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


def test_probs(cls: Prediction) -> None:
    f = F_CLS.astype(np.float64)
    expected = np.array([(_softmax(f[0, n]) + _softmax(f[1, n])) / 2 for n in range(2)])
    np.testing.assert_allclose(cls.probs, expected, rtol=1e-6)
    np.testing.assert_allclose(cls.probs.sum(axis=1), 1.0, rtol=1e-12)
    assert cls.probs.shape == (2, 3)
    assert cls.draws.shape == (2, 2, 3)


def test_log_likelihood_classification(cls: Prediction) -> None:
    f = F_CLS.astype(np.float64)
    expected = [
        math.log((_softmax(f[0, n])[Y_CLS[n]] + _softmax(f[1, n])[Y_CLS[n]]) / 2) for n in range(2)
    ]
    np.testing.assert_allclose(cls.log_predictive_density(Y_CLS), expected, rtol=1e-6)
    assert cls.mean_log_predictive_density(Y_CLS) == pytest.approx(np.mean(expected), rel=1e-6)
    # log p(y) under the averaged probabilities is the same quantity.
    np.testing.assert_allclose(
        cls.log_predictive_density(Y_CLS), np.log(cls.probs[[0, 1], Y_CLS]), rtol=1e-6
    )


@pytest.mark.parametrize("attr", ["mean", "std", "epistemic_std"])
def test_regression_summaries_raise_for_classification(cls: Prediction, attr: str) -> None:
    with pytest.raises(ValueError, match=f"{attr} is defined for regression; use probs"):
        getattr(cls, attr)


@pytest.mark.parametrize("n", [1, 3])
def test_wrong_length_y_classification(cls: Prediction, n: int) -> None:
    with pytest.raises(ValueError, match=rf"y has {n} entries but x has 2 rows"):
        cls.mean_log_predictive_density(np.zeros(n, dtype=int))


@pytest.mark.parametrize(
    ("y", "match"),
    [
        (np.array([0, 3]), "y has label 3 but the model allows classes 0..2"),
        (np.array([0, -1]), "found -1"),
        (np.array([0.0, 1.5]), "found non-integers"),
    ],
)
def test_bad_labels_classification(cls: Prediction, y: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls.mean_log_predictive_density(y)


def test_the_old_name_of_the_mean_log_predictive_density_warns(reg: Prediction) -> None:
    with pytest.warns(FutureWarning, match=r"now Prediction.mean_log_predictive_density\(y\)"):
        old = reg.log_likelihood(Y_REG)
    assert old == reg.mean_log_predictive_density(Y_REG)
