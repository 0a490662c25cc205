"""The offline sets: sine, gap (synthetic), diabetes, digits (scikit-learn)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from ppl_bnn.data import load_dataset, num_splits

REGRESSION = ("sine", "gap", "diabetes")


def assert_standardised(x: np.ndarray) -> None:
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(x.std(axis=0), 1.0, rtol=1e-10)


@pytest.mark.parametrize("name", REGRESSION)
def test_regression_sets_are_standardised_with_training_statistics(name: str) -> None:
    ds = load_dataset(name, split=2)
    assert ds.task == "regression" and ds.num_classes is None and ds.split == 2
    assert ds.x_train.dtype == ds.x_test.dtype == ds.y_train.dtype == np.float64
    assert ds.x_train.shape == (ds.n_train, ds.input_dim)
    assert ds.x_test.shape == (ds.n_test, ds.input_dim)
    assert_standardised(ds.x_train)
    assert_standardised(ds.y_train[:, None])
    assert ds.x_mean.shape == ds.x_std.shape == (ds.input_dim,)
    assert ds.source
    # y_to_original inverts the target standardisation; x_to_original the input one.
    np.testing.assert_allclose(ds.y_to_original(ds.y_train).mean(), ds.y_mean)
    np.testing.assert_allclose(ds.y_to_original(ds.y_train).std(), ds.y_std)
    np.testing.assert_allclose(ds.x_to_original(ds.x_train).mean(axis=0), ds.x_mean)


@pytest.mark.parametrize("name", ["sine", "gap", "diabetes", "digits"])
def test_splits_are_deterministic_and_distinct(name: str) -> None:
    assert num_splits(name) == 20
    a, b, other = (load_dataset(name, split=s) for s in (5, 5, 6))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert a.x_train.shape == other.x_train.shape
    assert not np.array_equal(a.x_to_original(a.x_train), other.x_to_original(other.x_train))


def test_seed_does_not_change_the_data_of_a_split() -> None:
    a = load_dataset("sine", split=1, seed=0)
    b = load_dataset("sine", split=1, seed=7)
    np.testing.assert_array_equal(a.x_train, b.x_train)


def test_sine_construction() -> None:
    ds = load_dataset("sine", split=0)
    assert (ds.n_train, ds.n_test, ds.input_dim) == (32, 200, 1)
    x_train = ds.x_to_original(ds.x_train)[:, 0]
    x_test = ds.x_to_original(ds.x_test)[:, 0]
    assert x_train.min() >= -0.5 and x_train.max() <= 0.5
    assert x_test.min() >= -1.5 and x_test.max() <= 1.5 and np.mean(np.abs(x_test) > 0.5) > 0.5
    residual = ds.y_to_original(ds.y_train) - 10 * np.sin(2 * np.pi * x_train)
    assert 0.5 < residual.std() < 1.6
    assert ds.x_grid is not None and ds.x_grid.shape == (300, 1)
    np.testing.assert_allclose(ds.x_to_original(ds.x_grid)[:, 0], np.linspace(-1.5, 1.5, 300))


def test_gap_construction() -> None:
    ds = load_dataset("gap", split=0)
    assert (ds.n_train, ds.input_dim) == (100, 1)
    x = ds.x_to_original(ds.x_train)[:, 0]
    left = (x >= -1.0) & (x <= -0.7)
    right = (x >= 0.5) & (x <= 1.0)
    assert left.sum() == right.sum() == 50
    residual = ds.y_to_original(ds.y_train) - np.cos(4 * x + 0.8)
    assert 0.06 < residual.std() < 0.14
    x_test = ds.x_to_original(ds.x_test)[:, 0]
    assert np.any((x_test > -0.7) & (x_test < 0.5)), "test points must cover the gap"
    assert np.any(x_test < -0.7) and np.any(x_test > 0.5)
    assert ds.x_grid is not None
    grid = ds.x_to_original(ds.x_grid)[:, 0]
    assert grid[0] == pytest.approx(-2.0) and grid[-1] == pytest.approx(2.0)


def test_diabetes_split_covers_the_data_in_original_units() -> None:
    ds = load_dataset("diabetes", split=3)
    assert (ds.n_train, ds.n_test, ds.input_dim) == (398, 44, 10)
    _, y = load_diabetes(return_X_y=True, scaled=False)
    both = np.concatenate([ds.y_to_original(ds.y_train), ds.y_to_original(ds.y_test)])
    np.testing.assert_allclose(np.sort(both), np.sort(y))


def test_digits_are_scaled_images_with_noise_ood() -> None:
    ds = load_dataset("digits", split=0)
    assert ds.task == "classification" and ds.num_classes == 10
    assert (ds.n_train, ds.n_test, ds.input_dim) == (1438, 359, 64)
    assert ds.y_train.dtype == ds.y_test.dtype == np.int64
    assert set(np.unique(ds.y_train)) == set(range(10))
    assert ds.x_train.min() == 0.0 and ds.x_train.max() == 1.0
    np.testing.assert_array_equal(ds.x_mean, 0.0)
    np.testing.assert_array_equal(ds.x_std, 1.0)
    assert (ds.y_mean, ds.y_std) == (0.0, 1.0)
    assert ds.ood_name == "uniform noise" and ds.x_ood is not None
    assert ds.x_ood.shape == (500, 64) and ds.x_ood.min() >= 0.0 and ds.x_ood.max() <= 1.0
    assert abs(ds.x_ood.mean() - 0.5) < 0.01
    with pytest.raises(ValueError, match="classification set"):
        ds.y_to_original(ds.y_train)


def test_test_regions_mark_where_training_inputs_lie() -> None:
    sine = load_dataset("sine", split=1)
    x = sine.x_to_original(sine.x_test)[:, 0]
    assert sine.regions == ("in range", "out of range")
    np.testing.assert_array_equal(sine.test_inside, np.abs(x) <= 0.5)
    gap = load_dataset("gap", split=1)
    x = gap.x_to_original(gap.x_test)[:, 0]
    assert gap.regions == ("in the clusters", "in the gap")
    np.testing.assert_array_equal(gap.test_inside, (x <= -0.7) | (x >= 0.5))
    # A test subset keeps each point's mark.
    sub = load_dataset("sine", split=1, max_test=40)
    x_sub = sub.x_to_original(sub.x_test)[:, 0]
    np.testing.assert_array_equal(sub.test_inside, np.abs(x_sub) <= 0.5)
    assert load_dataset("diabetes").test_inside is None


def test_test_regions_are_validated() -> None:
    sine = load_dataset("sine")
    with pytest.raises(ValueError, match="test_inside and regions must be given together"):
        replace(sine, regions=None)
    with pytest.raises(ValueError, match=r"test_inside must be bool of shape \(200,\)"):
        replace(sine, test_inside=sine.test_inside[:5])
