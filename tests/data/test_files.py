"""A user's own data file (CSV, TSV, Parquet, NPZ) as a data set: reading, checks, splits."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppl_bnn.data.files import (
    FILE_FORMATS,
    DataFileError,
    Table,
    file_sha256,
    load_file_split,
    read_table,
    split_rows,
)
from ppl_bnn.data.prepare import RawData, build

REGRESSION_CSV = "a,b,price\n1.0,10,2.5\n2.0,20,3.5\n3.0,30,1.0\n4.0,40,7.25\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def where(path: Path, column: str, row: int) -> str:
    """A regex matching the file, column and row of an error message."""
    return re.escape(f"{path}: column {column!r}, row {row}")


# --- reading each format -------------------------------------------------------------------


def test_csv_regression_roundtrip(tmp_path: Path) -> None:
    path = write(tmp_path / "data.csv", REGRESSION_CSV)
    table = read_table(path, target="price")
    assert isinstance(table, Table)
    assert table.task == "regression"
    assert table.features == ("a", "b")
    assert table.target == "price"
    assert table.classes is None
    assert table.path == str(path)
    assert table.x.dtype == np.float64 and table.x.shape == (4, 2)
    np.testing.assert_array_equal(table.x, [[1, 10], [2, 20], [3, 30], [4, 40]])
    assert table.y.dtype == np.float64
    np.testing.assert_array_equal(table.y, [2.5, 3.5, 1.0, 7.25])
    assert table.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert file_sha256(path) == table.sha256
    assert file_sha256(str(path)) == table.sha256


def test_features_order_and_subset(tmp_path: Path) -> None:
    path = write(tmp_path / "data.csv", REGRESSION_CSV)
    table = read_table(path, target="price", features=["b"])
    assert table.features == ("b",)
    np.testing.assert_array_equal(table.x, [[10], [20], [30], [40]])
    table = read_table(path, target="a", features=["price", "b"])
    assert table.features == ("price", "b")
    np.testing.assert_array_equal(table.x[0], [2.5, 10])


def test_tsv(tmp_path: Path) -> None:
    path = write(tmp_path / "data.TSV", REGRESSION_CSV.replace(",", "\t"))
    table = read_table(path, target="price")
    assert table.features == ("a", "b")
    np.testing.assert_array_equal(table.y, [2.5, 3.5, 1.0, 7.25])


def test_parquet(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "data.parquet"
    frame = pd.DataFrame(
        {"a": [1.0, 2.0, 3.0], "flag": [True, False, True], "label": ["cat", "dog", "cat"]}
    )
    frame.to_parquet(path)
    table = read_table(path, target="label")
    assert table.task == "classification"
    assert table.features == ("a", "flag")
    np.testing.assert_array_equal(table.x, [[1, 1], [2, 0], [3, 1]])
    assert table.classes == ("cat", "dog")
    np.testing.assert_array_equal(table.y, [0, 1, 0])


def test_parquet_without_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "data.parquet", "not really parquet")

    def no_engine(*args: object, **kwargs: object) -> None:
        raise ImportError("Unable to find a usable engine")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    with pytest.raises(DataFileError, match=re.escape(f"{path}") + ".*pip install pyarrow"):
        read_table(path, target="y")


def test_npz(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.savez(path, x=x, y=np.array([0.5, 1.5, -2.0, 3.0]))
    table = read_table(path)
    assert table.task == "regression"
    assert table.features == ("x0", "x1", "x2")
    assert table.target == "y"
    np.testing.assert_array_equal(table.x, x)
    assert table.x.dtype == np.float64
    assert read_table(path, target="y", features=["x2", "x0"]).features == ("x2", "x0")
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*'y', not 'price'"):
        read_table(path, target="price")


def test_npz_one_dimensional_x_and_integer_labels(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    np.savez(path, x=np.array([0.1, 0.2, 0.3, 0.4]), y=np.array([3, 1, 3, 1]))
    table = read_table(path)
    assert table.x.shape == (4, 1)
    assert table.task == "classification"
    assert table.classes == ("1", "3")
    np.testing.assert_array_equal(table.y, [1, 0, 1, 0])


def test_npz_without_arrays(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    np.savez(path, inputs=np.zeros((3, 2)), y=np.zeros(3))
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*'x' and 'y'.*'inputs'"):
        read_table(path)


# --- classification --------------------------------------------------------------------------


def test_string_labels_sorted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = "w,species\n1,virginica\n2,setosa\n3,versicolor\n4,setosa\n"
    path = write(tmp_path / "iris.csv", text)
    with caplog.at_level(logging.INFO, logger="ppl_bnn.data.files"):
        table = read_table(path, target="species")
    assert table.task == "classification"
    assert table.classes == ("setosa", "versicolor", "virginica")
    assert table.y.dtype == np.int64
    np.testing.assert_array_equal(table.y, [2, 0, 1, 0])
    assert "classification" in caplog.text and "0='setosa'" in caplog.text


def test_integer_labels(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "f,k\n0.1,3\n0.2,1\n0.3,2\n0.4,10\n")
    table = read_table(path, target="k")
    assert table.task == "classification"
    # numeric order, not string order ("10" after "3")
    assert table.classes == ("1", "2", "3", "10")
    np.testing.assert_array_equal(table.y, [2, 0, 1, 3])


def test_boolean_labels(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "f,ok\n0.1,True\n0.2,False\n0.3,True\n")
    table = read_table(path, target="ok")
    assert table.classes == ("False", "True")
    np.testing.assert_array_equal(table.y, [1, 0, 1])


def test_task_override(tmp_path: Path) -> None:
    path = write(tmp_path / "ratings.csv", "f,stars\n0.1,3\n0.2,1\n0.3,2\n0.4,5\n")
    table = read_table(path, target="stars", task="regression")
    assert table.task == "regression" and table.classes is None
    assert table.y.dtype == np.float64
    np.testing.assert_array_equal(table.y, [3, 1, 2, 5])
    path = write(tmp_path / "floats.csv", "f,c\n0.1,0.0\n0.2,1.0\n0.3,1.0\n")
    table = read_table(path, target="c", task="classification")
    assert table.classes == ("0", "1")
    np.testing.assert_array_equal(table.y, [0, 1, 1])
    with pytest.raises(DataFileError, match="task must be one of 'regression', 'classification'"):
        read_table(path, target="c", task="ranking")


def test_given_classes(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "f,c\n0.1,b\n0.2,b\n")
    table = read_table(path, target="c", classes=["a", "b"])
    assert table.task == "classification" and table.classes == ("a", "b")
    np.testing.assert_array_equal(table.y, [1, 1])
    with pytest.raises(DataFileError, match=where(path, "c", 1) + ".*'b' is not one of"):
        read_table(path, target="c", classes=["a", "z"])


def test_regression_target_with_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "f,t\n0.1,1.5\n0.2,2.5\n0.3,high\n")
    with pytest.raises(DataFileError, match=where(path, "t", 3) + ".*'high'"):
        read_table(path, target="t", task="regression")


# --- bad data ----------------------------------------------------------------------------------


def test_non_numeric_feature(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,b,y\n1,2,0.5\n2,3,1.5\n3,abc,2.5\n4,5,3.5\n")
    with pytest.raises(DataFileError, match=where(path, "b", 3) + ".*not a number: 'abc'"):
        read_table(path, target="y")
    # an unused column may hold anything
    assert read_table(path, target="y", features=["a"]).x.shape == (4, 1)


def test_missing_feature_value(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,b,y\n1,2,0.5\n2,,1.5\n3,4,2.5\n")
    with pytest.raises(DataFileError, match=where(path, "b", 2) + ": missing value"):
        read_table(path, target="y")


def test_missing_value_in_string_feature(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,b,y\n1,x,0.5\n2,,1.5\n")
    with pytest.raises(DataFileError, match=where(path, "b", 1) + ".*'x'"):
        read_table(path, target="y")


def test_missing_target_value(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n1,0.5\n2,1.5\n3,\n")
    with pytest.raises(DataFileError, match=where(path, "y", 3) + ": missing value"):
        read_table(path, target="y")
    path = write(tmp_path / "labels.csv", "a,y\n1,cat\n2,NA\n3,dog\n")
    with pytest.raises(DataFileError, match=where(path, "y", 2) + ": missing value"):
        read_table(path, target="y")


def test_infinite_value(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n1,0.5\ninf,1.5\n3,2\n")
    with pytest.raises(DataFileError, match=where(path, "a", 2) + ": infinite value"):
        read_table(path, target="y")


def test_constant_target(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n1,2.0\n2,2.0\n3,2.0\n")
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ": constant target.*'y'"):
        read_table(path, target="y")


def test_single_class(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n1,cat\n2,cat\n3,cat\n")
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*'y' has a single class"):
        read_table(path, target="y")


def test_target_column_absent(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", REGRESSION_CSV)
    message = re.escape(f"{path}: no target column 'cost'; the columns are 'a', 'b', 'price'")
    with pytest.raises(DataFileError, match=message):
        read_table(path, target="cost")
    message = re.escape(str(path)) + ".*target column.*the columns are"
    with pytest.raises(DataFileError, match=message):
        read_table(path)


def test_feature_columns_absent(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", REGRESSION_CSV)
    with pytest.raises(DataFileError, match=re.escape(f"{path}: no feature columns 'c', 'd'")):
        read_table(path, target="price", features=["a", "c", "d"])
    with pytest.raises(DataFileError, match="also a feature"):
        read_table(path, target="price", features=["a", "price"])


def test_empty_files(tmp_path: Path) -> None:
    for name in ("empty.csv", "empty.tsv", "empty.parquet", "empty.npz"):
        path = tmp_path / name
        path.write_bytes(b"")
        with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*has no rows"):
            read_table(path, target="y")
    path = write(tmp_path / "header.csv", "a,b,y\n")
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*has no rows"):
        read_table(path, target="y")
    path = write(tmp_path / "one.csv", "a,y\n1,2\n")
    with pytest.raises(DataFileError, match=re.escape(str(path)) + ".*only 1 row"):
        read_table(path, target="y")


def test_unknown_suffix_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path / "data.xlsx", "x")
    with pytest.raises(
        DataFileError,
        match=re.escape(str(path)) + ".*'.xlsx'.*" + ".*".join(re.escape(f) for f in FILE_FORMATS),
    ):
        read_table(path, target="y")
    with pytest.raises(DataFileError, match=re.escape(f"{tmp_path / 'nope.csv'}: no such file")):
        read_table(tmp_path / "nope.csv", target="y")


def test_sha256_changes_with_one_byte(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", REGRESSION_CSV)
    before = read_table(path, target="price").sha256
    path.write_text(REGRESSION_CSV.replace("7.25", "7.26"), encoding="utf-8")
    after = read_table(path, target="price").sha256
    assert before != after
    assert after == hashlib.sha256(path.read_bytes()).hexdigest()


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
