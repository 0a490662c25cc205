"""Names, split counts, argument errors, subsets, the data directory, the Dataset container."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.data import Dataset, dataset_names, load_dataset, num_splits, resolve_data_dir
from ppl_bnn.data.prepare import column_stats

UCI = [
    "bostonHousing",
    "concrete",
    "kin8nm",
    "naval-propulsion-plant",
    "power-plant",
    "protein-tertiary-structure",
    "wine-quality-red",
]


def test_dataset_names_lists_builtins_images_and_the_seven_uci_sets() -> None:
    names = dataset_names()
    assert names[:6] == ["sine", "gap", "diabetes", "digits", "mnist", "fashion-mnist"]
    assert names[6:] == UCI


def test_num_splits_of_offline_and_image_sets(tmp_path: Path) -> None:
    assert num_splits("gap") == 20
    assert num_splits("mnist", data_dir=tmp_path) == 1
    assert num_splits("fashion-mnist") == 1


def test_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown data set 'nope'.*sine.*bostonHousing"):
        load_dataset("nope", data_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown data set"):
        num_splits("nope", data_dir=tmp_path)
    with pytest.raises(ValueError, match=re.escape("unknown data set '../uci'")):
        load_dataset("../uci", data_dir=tmp_path)


@pytest.mark.parametrize(
    ("name", "split", "message"),
    [
        ("sine", 20, r"split must be in 0\.\.19 for sine \(20 splits\), got 20"),
        ("digits", -1, r"split must be in 0\.\.19"),
        ("mnist", 1, r"split must be in 0\.\.0 for mnist"),
        ("gap", 1.0, "split must be an integer"),
        ("gap", True, "split must be an integer"),
    ],
)
def test_bad_split(name: str, split: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        load_dataset(name, split=split, data_dir=tmp_path)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_train": 0}, "max_train must be a positive integer"),
        ({"max_test": 2.5}, "max_test must be a positive integer"),
        ({"seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_bad_subset_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_dataset("sine", **kwargs)


def test_max_train_and_max_test_take_seeded_subsets() -> None:
    full = load_dataset("diabetes", split=1)
    sub = load_dataset("diabetes", split=1, max_train=50, max_test=10, seed=3)
    again = load_dataset("diabetes", split=1, max_train=50, max_test=10, seed=3)
    other = load_dataset("diabetes", split=1, max_train=50, max_test=10, seed=4)
    assert (sub.n_train, sub.n_test) == (50, 10)
    np.testing.assert_array_equal(sub.x_train, again.x_train)
    assert not np.array_equal(sub.x_train, other.x_train)
    # The subset's rows are rows of the full split (compared in original units), without repeats.
    full_rows = {tuple(r) for r in np.round(full.x_to_original(full.x_train), 6)}
    sub_rows = [tuple(r) for r in np.round(sub.x_to_original(sub.x_train), 6)]
    assert len(set(sub_rows)) == 50 and set(sub_rows) <= full_rows
    # Standardised with the subset's own training statistics.
    np.testing.assert_allclose(sub.x_train.mean(axis=0), 0.0, atol=1e-10)
    # Limits above the size keep everything.
    big = load_dataset("diabetes", split=1, max_train=10_000)
    np.testing.assert_array_equal(big.x_train, full.x_train)


def test_max_test_caps_the_ood_inputs() -> None:
    ds = load_dataset("digits", max_test=40)
    assert ds.n_test == 40 and ds.x_ood is not None and ds.x_ood.shape == (40, 64)


def test_resolve_data_dir_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PPL_BNN_DATA", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_dir() == tmp_path / "env"
    monkeypatch.setenv("PPL_BNN_DATA", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_data_dir() == tmp_path / "home" / ".cache" / "ppl_bnn" / "data"
    monkeypatch.delenv("PPL_BNN_DATA")
    assert resolve_data_dir("~/d") == tmp_path / "home" / "d"


def test_column_stats_keeps_constant_columns_finite() -> None:
    x = np.array([[1.0, 0.3], [2.0, 0.3], [4.0, 0.3]])
    mean, std = column_stats(x)
    assert std[1] == 1.0 and mean[1] == 0.3
    assert np.all(np.isfinite((x - mean) / std)) and np.all((x - mean)[:, 1] == 0.0)


def _dataset(**changes: object) -> Dataset:
    fields: dict[str, object] = dict(
        name="toy",
        task="regression",
        split=0,
        x_train=np.zeros((3, 2)),
        y_train=np.zeros(3),
        x_test=np.zeros((1, 2)),
        y_test=np.zeros(1),
        num_classes=None,
        y_mean=0.0,
        y_std=1.0,
        x_mean=np.zeros(2),
        x_std=np.ones(2),
    )
    fields.update(changes)
    return Dataset(**fields)  # type: ignore[arg-type]


def test_dataset_properties_and_repr() -> None:
    ds = _dataset()
    assert (ds.n_train, ds.n_test, ds.input_dim) == (3, 1, 2)
    assert repr(ds).startswith("Dataset(name='toy', task='regression'")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"task": "ranking"}, "task must be one of"),
        ({"x_test": np.zeros((1, 3))}, r"x_test must be float64 of shape \(n, 2\)"),
        ({"y_train": np.zeros(2)}, r"y_train must have shape \(3,\)"),
        ({"x_std": np.ones(3)}, r"x_std must have shape \(2,\)"),
        ({"num_classes": 2}, "num_classes must be None for regression"),
        ({"y_std": 0.0}, "y_std must be positive"),
        ({"task": "classification", "num_classes": 2}, "int64 labels in 0..1"),
    ],
)
def test_dataset_validation(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _dataset(**changes)
