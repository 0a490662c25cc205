"""A user's own data file (CSV, TSV, Parquet, NPZ) as a data set: reading, checks, splits."""

from __future__ import annotations

import datetime
import hashlib
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
    read_table,
)

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
        {
            "a": [1.0, 2.0, 3.0, 4.0],
            "flag": [True, False, True, False],
            "label": ["cat", "dog", "cat", "dog"],
        }
    )
    frame.to_parquet(path)
    table = read_table(path, target="label")
    assert table.task == "classification"
    assert table.features == ("a", "flag")
    np.testing.assert_array_equal(table.x, [[1, 1], [2, 0], [3, 1], [4, 0]])
    assert table.classes == ("cat", "dog")
    np.testing.assert_array_equal(table.y, [0, 1, 0, 1])


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


def test_npz_names_its_columns_by_its_names_array(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    x, y = np.arange(6.0).reshape(3, 2), np.array([0.5, 1.5, -2.0])
    np.savez(path, x=x, y=y, names=np.array(["age", "dose"]))
    assert read_table(path).features == ("age", "dose")
    for bad in (["age"], ["age", "age"], ["age", "y"]):
        np.savez(path, x=x, y=y, names=np.array(bad))
        with pytest.raises(DataFileError, match="array 'names' must name the 2 columns of 'x'"):
            read_table(path)


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
    text = "w,species\n1,virginica\n2,setosa\n3,versicolor\n4,setosa\n5,virginica\n6,versicolor\n"
    path = write(tmp_path / "iris.csv", text)
    with caplog.at_level(logging.INFO, logger="ppl_bnn.data.files"):
        table = read_table(path, target="species")
    assert table.task == "classification"
    assert table.classes == ("setosa", "versicolor", "virginica")
    assert table.y.dtype == np.int64
    np.testing.assert_array_equal(table.y, [2, 0, 1, 0, 2, 1])
    assert "classification" in caplog.text and "0='setosa'" in caplog.text


def test_integer_labels(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.csv", "f,k\n0.1,3\n0.2,1\n0.3,2\n0.4,10\n0.5,3\n0.6,1\n0.7,2\n0.8,10\n"
    )
    table = read_table(path, target="k")
    assert table.task == "classification"
    # numeric order, not string order ("10" after "3")
    assert table.classes == ("1", "2", "3", "10")
    np.testing.assert_array_equal(table.y, [2, 0, 1, 3, 2, 0, 1, 3])


def test_boolean_labels(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "f,ok\n0.1,True\n0.2,False\n0.3,True\n0.4,False\n")
    table = read_table(path, target="ok")
    assert table.classes == ("False", "True")
    np.testing.assert_array_equal(table.y, [1, 0, 1, 0])


def test_task_override(tmp_path: Path) -> None:
    path = write(tmp_path / "ratings.csv", "f,stars\n0.1,3\n0.2,1\n0.3,2\n0.4,5\n")
    table = read_table(path, target="stars", task="regression")
    assert table.task == "regression" and table.classes is None
    assert table.y.dtype == np.float64
    np.testing.assert_array_equal(table.y, [3, 1, 2, 5])
    path = write(tmp_path / "floats.csv", "f,c\n0.1,0.0\n0.2,1.0\n0.3,1.0\n0.4,0.0\n")
    table = read_table(path, target="c", task="classification")
    assert table.classes == ("0", "1")
    np.testing.assert_array_equal(table.y, [0, 1, 1, 0])
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


# --- silent coercions, refused ----------------------------------------------------------------


def test_infinite_value_shown_as_written(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,b,y\n1,2,0.5\ninf,2,1.5\n3,-inf,2\n")
    with pytest.raises(DataFileError) as info:
        read_table(path, target="y", features=["a"])
    assert str(info.value) == f"{path}: column 'a', row 2: infinite value inf"
    with pytest.raises(DataFileError) as info:
        read_table(path, target="y", features=["b"])
    assert str(info.value) == f"{path}: column 'b', row 3: infinite value -inf"
    path = tmp_path / "d.npz"
    np.savez(path, x=np.array([1.0, 2.0, 3.0]), y=np.array([0.5, -np.inf, 1.0]))
    with pytest.raises(DataFileError) as info:
        read_table(path)
    assert str(info.value) == f"{path}: column 'y', row 2: infinite value -inf"


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_repeated_header_names_refused(tmp_path: Path, suffix: str) -> None:
    sep = "\t" if suffix == ".tsv" else ","
    text = "a,b,a,b,c,y\n1,2,3,4,5,0.5\n2,3,4,5,6,1.5\n3,4,5,6,7,2.5\n".replace(",", sep)
    path = write(tmp_path / f"d{suffix}", text)
    message = re.escape(f"{path}: repeated column names 'a', 'b'") + ".*rename"
    with pytest.raises(DataFileError, match=message):
        read_table(path, target="y")
    with pytest.raises(DataFileError, match=message):  # even if only other columns are used
        read_table(path, target="y", features=["c"])
    # a column really named 'a.1' (pandas' name for a second 'a') is not a repeat
    path = write(tmp_path / f"ok{suffix}", "a,a.1,y\n1,2,0.5\n2,3,1.5\n".replace(",", sep))
    assert read_table(path, target="y").features == ("a", "a.1")
    quoted = write(tmp_path / "quoted.csv", '"a,1",a,y\n1,2,0.5\n2,3,1.5\n')
    assert read_table(quoted, target="y").features == ("a,1", "a")


def test_repeated_parquet_column_names_refused(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "d.parquet"
    columns = [pa.array([1.0, 2.0, 3.0]), pa.array([4.0, 5.0, 6.0]), pa.array([0.5, 1.5, 2.5])]
    pq.write_table(pa.table(columns, names=["a", "a", "y"]), path)
    with pytest.raises(DataFileError, match=re.escape(f"{path}: repeated column name 'a';")):
        read_table(path, target="y")


def test_complex_values_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.npz"
    np.savez(path, x=np.array([1 + 2j, 2, 3, 4]), y=np.array([0.5, 1.5, 2.5, 3.5]))
    with pytest.raises(DataFileError, match=re.escape(f"{path}: column 'x0'") + ".*complex"):
        read_table(path)
    path = tmp_path / "y.npz"
    np.savez(path, x=np.array([1.0, 2.0, 3.0, 4.0]), y=np.array([1 + 1j, 2, 1 + 1j, 2]))
    with pytest.raises(DataFileError, match=re.escape(f"{path}: column 'y'") + ".*complex"):
        read_table(path)
    with pytest.raises(DataFileError, match=re.escape(f"{path}: column 'y'") + ".*complex"):
        read_table(path, task="classification")
    # in a CSV, '1+2j' is text: not a number
    path = write(tmp_path / "d.csv", "a,y\n1,0.5\n1+2j,1.5\n3,2.5\n")
    with pytest.raises(DataFileError, match=where(path, "a", 2) + ": not a number: '1\\+2j'"):
        read_table(path, target="y")


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-04"]), "datetimes"),
        (
            pd.to_datetime(["2020-01-01", "2020-01-02", "2020-01-04"]).tz_localize("UTC"),
            "datetimes",
        ),
        (pd.to_timedelta([1, 2, 4], unit="s"), "timedeltas"),
        ([datetime.date(2020, 1, d) for d in (1, 2, 4)], "dates"),
    ],
)
def test_parquet_times_refused(tmp_path: Path, values: object, kind: str) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "d.parquet"
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "when": values, "y": [0.5, 1.5, 2.5]}).to_parquet(path)
    message = re.escape(f"{path}: column 'when' holds {kind}") + ".*convert it to a number"
    with pytest.raises(DataFileError, match=message):
        read_table(path, target="y")
    with pytest.raises(DataFileError, match=message):
        read_table(path, target="when", features=["a"])
    assert read_table(path, target="y", features=["a"]).x.shape == (3, 1)  # unused: fine


def test_npz_times_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    days = np.array(["2020-01-01", "2020-01-02", "2020-01-04"], dtype="datetime64[D]")
    np.savez(path, x=days, y=np.array([0.5, 1.5, 2.5]))
    with pytest.raises(DataFileError, match=re.escape(f"{path}: column 'x0' holds datetimes")):
        read_table(path)
    np.savez(path, x=np.array([1.0, 2.0, 3.0]), y=days)
    with pytest.raises(DataFileError, match=re.escape(f"{path}: column 'y' holds datetimes")):
        read_table(path)
    np.savez(path, x=np.array([1, 2, 4], dtype="timedelta64[s]"), y=np.array([0.5, 1.5, 2.5]))
    with pytest.raises(DataFileError, match=re.escape(f"{path}: column 'x0' holds timedeltas")):
        read_table(path)


def test_parquet_categorical_and_bool(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "d.parquet"
    frame = pd.DataFrame(
        {
            "flag": [True, False, True, False],
            "colour": pd.Categorical(["red", "blue", "red", "blue"]),
            "label": pd.Categorical(["cat", "dog", "dog", "cat"]),
        }
    )
    frame.to_parquet(path)
    table = read_table(path, target="label", features=["flag"])  # booleans: 0/1
    np.testing.assert_array_equal(table.x[:, 0], [1, 0, 1, 0])
    assert table.task == "classification" and table.classes == ("cat", "dog")
    with pytest.raises(DataFileError, match=where(path, "colour", 1) + ".*not a number: 'red'"):
        read_table(path, target="label")


def test_too_many_classes_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = "\n".join(f"{i / 100},{i}" for i in range(1000))
    path = write(tmp_path / "ids.csv", "a,id\n" + rows + "\n")
    message = (
        re.escape(f"{path}: column 'id' has 1000 classes in 1000 rows")
        + ".*"
        + re.escape('task="regression" (--task regression)')
    )
    with (
        caplog.at_level(logging.INFO, logger="ppl_bnn.data.files"),
        pytest.raises(DataFileError, match=message),
    ):
        read_table(path, target="id")
    assert all(len(r.getMessage()) < 1000 for r in caplog.records)
    assert read_table(path, target="id", task="regression").task == "regression"
    # string labels: no regression hint
    rows = "\n".join(f"{i / 100},u{i % 60}" for i in range(100))
    path = write(tmp_path / "names.csv", "a,name\n" + rows + "\n")
    with pytest.raises(DataFileError, match="60 classes in 100 rows") as info:
        read_table(path, target="name")
    assert "regression" not in str(info.value)


def test_class_listings_are_capped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rows = "\n".join(f"{i / 100},c{i % 50:02d}" for i in range(100))  # share 0.5: allowed
    path = write(tmp_path / "d.csv", "a,c\n" + rows + "\n")
    with caplog.at_level(logging.INFO, logger="ppl_bnn.data.files"):
        table = read_table(path, target="c")
    assert len(table.classes) == 50
    assert "0='c00'" in caplog.text and "... and 40 more" in caplog.text
    assert "c49" not in caplog.text
    test = write(tmp_path / "test.csv", "a,c\n0.5,c01\n0.7,zz\n")
    with pytest.raises(DataFileError, match=where(test, "c", 2) + ".*'zz'.*and 40 more") as info:
        read_table(test, target="c", classes=table.classes)
    assert "c49" not in str(info.value)
