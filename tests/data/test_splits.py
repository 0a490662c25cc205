"""Splitting a data file's rows: seeded random splits stratified by class, a test file, and
the splits refused before any cell runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.data.files import DataFileError, array_table, file_sha256, read_table
from ppl_bnn.data.prepare import RawData, build
from ppl_bnn.data.splits import load_file_split, split_rows, split_table
from tests.data.test_files import where, write

# --- split_rows ------------------------------------------------------------------------------


def test_split_rows_sizes_and_determinism() -> None:
    train, test = split_rows(50, test_fraction=0.2, split=3, seed=7)
    assert train.dtype == np.int64 and test.dtype == np.int64
    assert len(test) == 10 and len(train) == 40
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
    assert np.intersect1d(train, test).size == 0
    np.testing.assert_array_equal(np.union1d(train, test), np.arange(50))
    again = split_rows(50, test_fraction=0.2, split=3, seed=7)
    np.testing.assert_array_equal(again[0], train)
    np.testing.assert_array_equal(again[1], test)
    other = split_rows(50, test_fraction=0.2, split=4, seed=7)[1]
    assert not np.array_equal(other, test)
    assert not np.array_equal(split_rows(50, test_fraction=0.2, split=3, seed=8)[1], test)


def test_split_rows_small() -> None:
    train, test = split_rows(2, test_fraction=0.01, split=0)
    assert len(test) == 1 and len(train) == 1
    train, test = split_rows(3, test_fraction=0.99, split=0)
    assert len(test) == 2 and len(train) == 1


@pytest.mark.parametrize("fraction", [0, 1, -0.5, 1.5, float("nan"), True])
def test_split_rows_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        split_rows(10, test_fraction=fraction, split=0)


def test_split_rows_stratified() -> None:
    y = np.array([0] * 20 + [1] * 6 + [2] * 2 + [3])
    for split in range(10):
        train, test = split_rows(len(y), test_fraction=0.5, split=split, y=y)
        assert np.intersect1d(train, test).size == 0
        assert len(train) + len(test) == len(y)
        assert set(y[train]) == {0, 1, 2, 3}
        counts = np.bincount(y[test], minlength=4)
        np.testing.assert_array_equal(counts, [10, 3, 1, 0])
    # a fraction that rounds every class to 0 still gives one test row, keeping classes in train
    y = np.array([0, 0, 1, 1, 2, 2, 2])
    train, test = split_rows(len(y), test_fraction=0.05, split=0, y=y)
    assert len(test) == 1 and y[test[0]] == 2
    assert set(y[train]) == {0, 1, 2}
    with pytest.raises(ValueError, match="integer class labels"):
        split_rows(3, test_fraction=0.5, split=0, y=np.array([0.5, 1.0, 2.0]))


# --- load_file_split -------------------------------------------------------------------------


def classification_csv(tmp_path: Path, name: str = "train.csv") -> Path:
    rows = [f"{i / 10},{i % 3},{'abc'[i % 3]}" for i in range(30)]
    return write(tmp_path / name, "u,v,label\n" + "\n".join(rows) + "\n")


def test_load_file_split_fraction(tmp_path: Path) -> None:
    path = classification_csv(tmp_path)
    raw, info = load_file_split(path, target="label", test_fraction=0.2, split=1, seed=5)
    assert isinstance(raw, RawData)
    assert raw.task == "classification" and raw.num_classes == 3
    assert raw.x_train.shape == (24, 2) and raw.x_test.shape == (6, 2)
    assert raw.y_train.dtype == np.int64
    assert set(raw.y_train) == {0, 1, 2}
    assert raw.source.startswith(f"file {path} (sha256 {file_sha256(path)[:8]}...), target 'label'")
    assert "\n" not in raw.source
    json.dumps(info)
    assert info["path"] == str(path) and info["sha256"] == file_sha256(path)
    assert info["features"] == ["u", "v"] and info["task"] == "classification"
    assert info["classes"] == ["a", "b", "c"]
    assert info["test_fraction"] == 0.2 and info["seed"] == 5 and info["split"] == 1
    assert "test_path" not in info
    assert sorted(info["train_rows"] + info["test_rows"]) == list(range(30))
    table = read_table(path, target="label")
    np.testing.assert_array_equal(raw.x_test, table.x[info["test_rows"]])
    np.testing.assert_array_equal(raw.y_train, table.y[info["train_rows"]])
    _, info_again = load_file_split(path, target="label", test_fraction=0.2, split=1, seed=5)
    assert info_again == info
    other = load_file_split(path, target="label", test_fraction=0.2, split=2, seed=5)[1]
    assert other["test_rows"] != info["test_rows"]
    named = load_file_split(path, target="label", test_fraction=0.2, name="mine")[0]
    assert named.source.startswith("mine: file ")
    # the RawData goes through the ordinary pipeline
    ds = build("mine", 1, raw)
    assert ds.num_classes == 3 and ds.x_train.shape == (24, 2)


def test_load_file_split_regression(tmp_path: Path) -> None:
    rows = [f"{i},{i * i % 7},{0.5 * i}" for i in range(10)]
    path = write(tmp_path / "r.csv", "a,b,y\n" + "\n".join(rows) + "\n")
    raw, info = load_file_split(path, target="y", test_fraction=0.3)
    assert raw.task == "regression" and raw.num_classes is None
    assert len(raw.y_test) == 3 and raw.y_train.dtype == np.float64
    assert info["classes"] is None


def test_load_file_split_test_path(tmp_path: Path) -> None:
    path = classification_csv(tmp_path)
    test_path = write(tmp_path / "test.csv", "v,u,label\n1,0.5,c\n0,0.25,a\n")
    raw, info = load_file_split(path, target="label", test_path=test_path)
    assert raw.x_train.shape == (30, 2)
    np.testing.assert_array_equal(raw.x_test, [[0.5, 1], [0.25, 0]])  # training column order
    np.testing.assert_array_equal(raw.y_test, [2, 0])
    assert info["test_path"] == str(test_path)
    assert info["test_sha256"] == file_sha256(test_path)
    assert info["test_fraction"] is None
    assert info["train_rows"] == list(range(30)) and info["test_rows"] == [0, 1]
    assert f"test file {test_path}" in raw.source
    json.dumps(info)


def test_load_file_split_test_label_outside_classes(tmp_path: Path) -> None:
    path = classification_csv(tmp_path)
    test_path = write(tmp_path / "test.csv", "u,v,label\n0.5,1,a\n0.2,0,z\n")
    with pytest.raises(DataFileError, match=where(test_path, "label", 2) + ".*'z'"):
        load_file_split(path, target="label", test_path=test_path)


def test_load_file_split_test_columns_differ(tmp_path: Path) -> None:
    path = classification_csv(tmp_path)
    test_path = write(tmp_path / "test.csv", "u,label\n0.5,a\n0.2,b\n")
    with pytest.raises(DataFileError, match=re.escape(f"{test_path}: no feature column 'v'")):
        load_file_split(path, target="label", test_path=test_path)
    test_path = write(tmp_path / "extra.csv", "u,v,w,label\n0.5,1,9,a\n0.2,0,9,b\n")
    with pytest.raises(DataFileError, match=re.escape(str(test_path)) + ".*columns differ"):
        load_file_split(path, target="label", test_path=test_path)


def test_load_file_split_fraction_xor_test_path(tmp_path: Path) -> None:
    path = classification_csv(tmp_path)
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*exactly one.*neither"):
        load_file_split(path, target="label")
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*exactly one.*both"):
        load_file_split(path, target="label", test_fraction=0.2, test_path=path)
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*test_fraction.*1.0"):
        load_file_split(path, target="label", test_fraction=1.0)
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*split.*-1"):
        load_file_split(path, target="label", test_fraction=0.5, split=-1)


def test_a_split_that_leaves_no_target_to_learn_is_refused(tmp_path: Path) -> None:
    """A test share that leaves one training row (or training rows of one target value): no
    fit can standardise or learn it, so it is refused with the split named, not in a cell."""
    rows = [f"{i},{i % 7 * 0.5}" for i in range(60)]
    path = write(tmp_path / "r.csv", "a,y\n" + "\n".join(rows) + "\n")
    message = re.escape(f"{path}: the target is ") + r".* in every one of the 1 training row "
    with pytest.raises(DataFileError, match=message + "of split 0: no fit can learn"):
        load_file_split(path, target="y", test_fraction=0.999)
    constant = write(tmp_path / "c.csv", "a,y\n1,2.0\n2,2.0\n3,2.0\n4,5.0\n")
    for split in range(4):  # the one row of 5.0 is held out in some split
        try:
            load_file_split(constant, target="y", test_fraction=0.25, split=split)
        except DataFileError as err:
            assert "the target is 2 in every one of the 3 training rows" in str(err)
            break
    else:
        pytest.fail("no split held out the one row of another value")


def test_arrays_in_memory_are_split_and_checked_as_a_file_is() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(60, 2)), rng.normal(size=60)
    table = array_table(x, y, num_classes=None, name="mine")
    (raw, info), _ = split_table(table, test_fraction=0.2, splits=[0, 1], name="mine")
    assert raw.x_train.shape == (48, 2) and len(info["test_rows"]) == 12
    np.testing.assert_array_equal(raw.y_test, y[info["test_rows"]])
    with pytest.raises(DataFileError, match=r"mine: the target is .* 1 training row of split 0"):
        split_table(table, test_fraction=0.999)
    with pytest.raises(DataFileError, match=r"mine: test_fraction must be in \(0, 1\)"):
        split_table(table, test_fraction=1.5)
    # As many classes as rows: every class a single row.
    with pytest.raises(DataFileError, match="mine: column 'y' has 60 classes in 60 rows"):
        array_table(x, np.arange(60), num_classes=60, name="mine")
