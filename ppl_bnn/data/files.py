"""A user's own data file as a data set: CSV, TSV, Parquet or NPZ.

:func:`read_table` reads one file into a checked :class:`Table` (float features, a float or
integer-label target); :func:`array_table` makes one of arrays in memory, checked alike;
:mod:`ppl_bnn.data.splits` splits either into training and test rows. Every problem with the data
raises :class:`DataFileError`, whose message names the file and, where it applies, the column and
row.

Rows in messages are data rows counted from 1, as a user counts them in the file: "row 3" is the
third data row after the header (blank lines of a CSV/TSV are skipped and not counted).
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.model.targets import infer_task, label_text, sorted_labels

log = logging.getLogger(__name__)

#: File suffixes :func:`read_table` reads (case-insensitive).
FILE_FORMATS: tuple[str, ...] = (".csv", ".tsv", ".parquet", ".npz")

#: The tasks a file can hold.
TASKS: tuple[str, ...] = ("regression", "classification")

#: Most classes a file's labels may have, as a share of its rows. A class is learned from its
#: training rows and scored on its test rows, so it needs at least 2 rows; more classes than half
#: the rows means some class has a single row (and a target of row ids or measurements is likely
#: mistaken for labels). :func:`read_table` refuses classification beyond it when it infers the
#: classes from the file (not with given ``classes``, as for a small test file).
MAX_CLASS_SHARE = 0.5

#: Items of a listing (labels, column names) shown in a message before "... and N more".
_LISTED = 10

_CHUNK = 1 << 20


class DataFileError(ValueError):
    """A data file that cannot be used; the message names the file and, where it applies, the
    column and row."""


@dataclass(frozen=True, eq=False)
class Table:
    """One data file, checked and converted.

    Attributes:
        x: ``(N, D)`` float64 features, all finite.
        y: ``(N,)`` float64 targets (regression) or int64 class indices ``0..K-1``
            (classification).
        task: ``"regression"`` or ``"classification"``.
        features: the feature columns in order (NPZ: ``"x0", "x1", ...``).
        target: the target column (NPZ: ``"y"``).
        classes: classification: the original labels as strings, index ``k`` -> label;
            ``None`` for regression.
        path: the file, as given.
        sha256: hex SHA-256 of the file's bytes.
        columns: every column of the file, used or not.
    """

    x: np.ndarray
    y: np.ndarray
    task: str
    features: tuple[str, ...]
    target: str
    classes: tuple[str, ...] | None
    path: str
    sha256: str
    columns: tuple[str, ...] = ()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _suffix(path: str) -> str:
    """The format suffix of ``path`` (lower case); :class:`DataFileError` for an unknown one."""
    suffix = Path(path).suffix.lower()
    if suffix not in FILE_FORMATS:
        raise DataFileError(
            f"{path}: unknown data file format {Path(path).suffix or '(no suffix)'!r}; "
            f"known formats: {', '.join(FILE_FORMATS)}"
        )
    return suffix


def _listing(items: Iterable[Any], limit: int = _LISTED) -> str:
    """``items`` quoted and comma-separated, the first ``limit`` of them, then "... and N more"."""
    items = list(items)
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f", ... and {len(items) - limit} more" if len(items) > limit else "")


def _show(value: Any) -> str:
    """A value as a user writes it: numbers plainly (``inf``, ``-inf``, ``nan``, ``1.5``),
    strings and other objects by their repr."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return str(float(value))
    if isinstance(value, str):
        return repr(str(value))
    return repr(value)


def _repeated(path: str, names: Sequence[Any]) -> None:
    """Raise naming the repeated ones of ``names`` (column names as written in the file)."""
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        plural = "s" if len(repeated) > 1 else ""
        raise DataFileError(
            f"{path}: repeated column name{plural} {_listing(repeated)}; "
            "rename the columns so each name is used once"
        )


def _csv_header(path: str, sep: str) -> list[str] | None:
    """The header row of a CSV/TSV file as written (first non-blank row); ``None`` if unreadable.

    pandas renames a repeated name ``a`` to ``a.1``, which a real column may also be called, so
    repeats are looked for here, in the file itself.
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            return next((row for row in csv.reader(handle, delimiter=sep) if row), None)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def _parquet_names(path: str) -> list[str] | None:
    """The column names of a Parquet file's schema; ``None`` without pyarrow or if unreadable.

    pyarrow writes repeated names, but reading them back fails with an obscure message.
    """
    try:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    except (ImportError, OSError, ValueError):  # pd.read_parquet then says why
        return None


def _read_npz(path: str, *, targets: bool = True) -> pd.DataFrame:
    """Arrays ``x`` ((N, D) or (N,)) and ``y`` ((N,)) of an NPZ file as columns named by its
    array ``names`` (D distinct strings) where it has one, else x0, x1, ...; and y (optional
    where not ``targets``: a file of inputs to predict at)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = sorted(archive.files)
            needed = ("x", "y") if targets else ("x",)
            if any(n not in names for n in needed):
                raise DataFileError(
                    f"{path}: an NPZ data file needs arrays {' and '.join(map(repr, needed))}; "
                    f"it has {', '.join(repr(n) for n in names) or 'none'}"
                )
            x = archive["x"]
            y = archive["y"] if "y" in names else None
            given = archive["names"] if "names" in names else None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        if isinstance(exc, DataFileError):
            raise
        raise DataFileError(f"{path}: cannot read it as an NPZ file ({exc})") from exc
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataFileError(f"{path}: array 'x' must be (N, D) or (N,), got shape {x.shape}")
    if y is not None and y.ndim != 1:
        raise DataFileError(f"{path}: array 'y' must be (N,), got shape {y.shape}")
    if y is not None and len(x) != len(y):
        raise DataFileError(f"{path}: 'x' has {len(x)} rows but 'y' has {len(y)}")
    labels = [f"x{j}" for j in range(x.shape[1])]
    if given is not None:
        labels = [str(n) for n in np.atleast_1d(given)]
        if len(labels) != x.shape[1] or len(set(labels)) != len(labels) or "y" in labels:
            raise DataFileError(
                f"{path}: array 'names' must name the {x.shape[1]} columns of 'x' once each "
                f"(and not 'y'), got {_listing(labels)}"
            )
    columns = dict(zip(labels, x.T, strict=True))
    if y is not None:
        columns["y"] = y
    return pd.DataFrame(columns)


def _read_frame(path: str, suffix: str, *, targets: bool = True) -> pd.DataFrame:
    """The file's rows as a DataFrame with string column names."""
    if suffix == ".npz":
        return _read_npz(path, targets=targets)
    if suffix == ".parquet":
        _repeated(path, _parquet_names(path) or [])
        try:
            frame = pd.read_parquet(path)
        except ImportError as exc:
            raise DataFileError(
                f"{path}: reading Parquet files needs pyarrow (or fastparquet): "
                f"pip install pyarrow ({exc})"
            ) from exc
        except (OSError, ValueError, TypeError) as exc:
            raise DataFileError(f"{path}: cannot read it as a Parquet file ({exc})") from exc
    else:
        sep = "\t" if suffix == ".tsv" else ","
        try:
            frame = pd.read_csv(path, sep=sep, low_memory=False)
        except pd.errors.EmptyDataError as exc:
            raise DataFileError(f"{path}: the file has no rows") from exc
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            kind = "TSV" if suffix == ".tsv" else "CSV"
            raise DataFileError(f"{path}: cannot parse it as {kind} ({exc})") from exc
        _repeated(path, _csv_header(path, sep) or [])
    frame.columns = [str(c) for c in frame.columns]
    _repeated(path, frame.columns)
    return frame.reset_index(drop=True)


def _first_problem(
    path: str, column: str, missing: np.ndarray, bad: np.ndarray, values: np.ndarray, what: str
) -> None:
    """Raise for the first row that is missing or ``bad`` (not a number / not finite)."""
    problem = missing | bad
    if not problem.any():
        return
    i = int(np.argmax(problem))
    where = f"{path}: column {column!r}, row {i + 1}"
    if missing[i]:
        raise DataFileError(f"{where}: missing value")
    raise DataFileError(f"{where}: {what} {_show(values[i])}")


#: What :func:`pandas.api.types.infer_dtype` calls values that must not be read as numbers.
_TIME_KINDS = {
    "datetime64": "datetimes",
    "datetime": "datetimes",
    "date": "dates",
    "time": "times of day",
    "period": "periods",
    "timedelta64": "timedeltas",
    "timedelta": "timedeltas",
}


def _refuse_kind(path: str, frame: pd.DataFrame, column: str) -> None:
    """Raise for a column of complex numbers or of dates, times or durations.

    pandas would read these as numbers silently: complex ones losing their imaginary part,
    times as nanoseconds (or microseconds) since 1970.
    """
    series = frame[column]
    dtype = series.dtype
    values: Any = series
    if isinstance(dtype, pd.CategoricalDtype):
        values = dtype.categories
        dtype = values.dtype
    if pd.api.types.is_complex_dtype(dtype):
        kind = "complex"
    elif pd.api.types.is_datetime64_any_dtype(dtype) or isinstance(dtype, pd.PeriodDtype):
        kind = "datetime"
    elif pd.api.types.is_timedelta64_dtype(dtype):
        kind = "timedelta"
    elif pd.api.types.is_object_dtype(dtype):
        kind = pd.api.types.infer_dtype(values, skipna=True)
    else:
        return
    if kind == "complex":
        raise DataFileError(
            f"{path}: column {column!r} holds complex numbers ({dtype}); only real numbers can "
            "be used: keep the real part or the magnitude yourself, or split it into two columns"
        )
    if kind in _TIME_KINDS:
        raise DataFileError(
            f"{path}: column {column!r} holds {_TIME_KINDS[kind]} ({dtype}); convert it to a "
            "number yourself (e.g. seconds since an origin of your choice), or leave it out"
        )


def _numeric(path: str, frame: pd.DataFrame, column: str) -> np.ndarray:
    """Column ``column`` as finite float64; booleans count as 0/1.

    Raises :class:`DataFileError` naming the first row with a missing, non-numeric or infinite
    value (the column must have passed :func:`_refuse_kind`).
    """
    series = frame[column]
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) or (
        pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype)
    ):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(values)
    else:
        raw = series.astype(object).to_numpy()
        missing = pd.isna(series).to_numpy()
        numbers = pd.to_numeric(pd.Series(raw), errors="coerce")
        if pd.api.types.is_complex_dtype(numbers.dtype):
            _refuse_kind(path, pd.DataFrame({column: numbers}), column)
        values = numbers.to_numpy(dtype=np.float64)
        _first_problem(path, column, missing, np.isnan(values) & ~missing, raw, "not a number:")
    _first_problem(path, column, missing, np.isinf(values), values, "infinite value")
    return values


def _labels(path: str, frame: pd.DataFrame, column: str) -> list[Any]:
    """The target column's labels as Python objects; raises for a missing label."""
    series = frame[column]
    missing = pd.isna(series).to_numpy()
    raw = series.astype(object).to_numpy()
    _first_problem(path, column, missing, np.zeros_like(missing), raw, "")
    return list(raw)


def _check_class_count(path: str, target: str, count: int, labels: list[Any]) -> None:
    """Raise if ``count`` classes are more than :data:`MAX_CLASS_SHARE` of the rows."""
    rows = len(labels)
    if count <= MAX_CLASS_SHARE * rows:
        return
    numeric = all(
        isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)
        for v in labels
    )
    hint = (
        'if it is a numeric target, pass task="regression" (--task regression)'
        if numeric
        else "merge rare classes, or choose another target column"
    )
    raise DataFileError(
        f"{path}: column {target!r} has {count} classes in {rows} rows, more than "
        f"{MAX_CLASS_SHARE:g} of the rows (at most {int(MAX_CLASS_SHARE * rows)}): a class needs "
        f"rows in both the training and the test split; {hint}"
    )


def _columns(path: str, frame: pd.DataFrame, names: Sequence[str], what: str) -> None:
    """Raise naming every name of ``names`` that is not a column of ``frame``."""
    absent = [n for n in names if n not in frame.columns]
    if absent:
        plural = "s" if len(absent) > 1 else ""
        raise DataFileError(
            f"{path}: no {what} column{plural} {_listing(absent)}; "
            f"the columns are {_listing(frame.columns, 4 * _LISTED)}"
        )


def _read(
    path: str | os.PathLike[str],
    *,
    target: str | None,
    features: Sequence[str] | None,
    task: str | None,
    classes: Sequence[str] | None,
) -> Table:
    """:func:`read_table`."""
    path = str(path)
    suffix = _suffix(path)
    task, classes = _task_and_classes(path, task, classes)
    if not os.path.isfile(path):
        raise DataFileError(f"{path}: no such file")
    if suffix == ".npz":
        if target not in (None, "y"):
            raise DataFileError(
                f"{path}: the target of an NPZ file is its array 'y', not {target!r}"
            )
        target = "y"
    sha256 = file_sha256(path)
    if os.path.getsize(path) == 0:
        raise DataFileError(f"{path}: the file has no rows (it is empty)")
    frame = _read_frame(path, suffix)
    columns = tuple(frame.columns)
    if target is None:
        raise DataFileError(
            f"{path}: name the target column (target=...); "
            f"the columns are {_listing(columns, 4 * _LISTED)}"
        )
    _columns(path, frame, [target], "target")
    used = _feature_columns(path, frame, target, features)
    if len(frame) == 0:
        raise DataFileError(f"{path}: the file has no rows")
    if len(frame) < 2:
        raise DataFileError(f"{path}: the file has only 1 row; at least 2 are needed")

    for column in (*used, target):
        _refuse_kind(path, frame, column)
    x = np.column_stack([_numeric(path, frame, c) for c in used])
    if task is None:
        task = infer_task(frame[target].dtype)
        log.info("%s: task %s, inferred from the %s dtype of target %r",
                 path, task, frame[target].dtype, target)  # fmt: skip
    if task == "regression":
        y = _numeric(path, frame, target)
        if np.ptp(y) == 0:
            raise DataFileError(
                f"{path}: constant target: column {target!r} is {y[0]:g} in every row"
            )
        return Table(x, y, task, used, target, None, path, sha256, columns)
    y, classes = _class_indices(path, frame, target, classes)
    return Table(x, y, task, used, target, classes, path, sha256, columns)


def _task_and_classes(
    path: str, task: str | None, classes: Sequence[str] | None
) -> tuple[str | None, tuple[str, ...] | None]:
    """The task and classes asked for, checked: given classes make it a classification."""
    if task is not None and task not in TASKS:
        raise DataFileError(
            f"{path}: task must be one of {', '.join(repr(t) for t in TASKS)}, got {task!r}"
        )
    if classes is None:
        return task, None
    if task == "regression":
        raise DataFileError(f"{path}: classes are given, but the task is 'regression'")
    given = tuple(str(c) for c in classes)
    if len(set(given)) != len(given) or not given:
        raise DataFileError(f"{path}: classes must be distinct and not empty: {_listing(given)}")
    return "classification", given


def _feature_columns(
    path: str, frame: pd.DataFrame, target: str, features: Sequence[str] | None
) -> tuple[str, ...]:
    """The feature columns: those given (each present, none the target, none twice), else
    every column but the target; at least one."""
    if features is None:
        used = tuple(c for c in frame.columns if c != target)
    elif isinstance(features, str):
        raise DataFileError(f"{path}: features must be a list of column names, got {features!r}")
    else:
        used = tuple(str(f) for f in features)
        _columns(path, frame, used, "feature")
        if target in used:
            raise DataFileError(f"{path}: the target column {target!r} is also a feature")
        if len(set(used)) != len(used):
            raise DataFileError(f"{path}: repeated feature columns: {', '.join(used)}")
    if not used:
        raise DataFileError(f"{path}: no feature columns besides the target {target!r}")
    return used


def _class_indices(
    path: str, frame: pd.DataFrame, target: str, classes: tuple[str, ...] | None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """The target's labels as class indices, and the classes: those given, else the distinct
    labels in sorted order (at least 2, not too many for the rows, logged)."""
    labels = _labels(path, frame, target)
    names = [label_text(v) for v in labels]
    if classes is None:
        classes = tuple(sorted_labels(labels))
        if len(classes) < 2:
            raise DataFileError(
                f"{path}: column {target!r} has a single class ({classes[0]!r}); "
                "classification needs at least 2"
            )
        _check_class_count(path, target, len(classes), labels)
        shown = ", ".join(f"{k}={c!r}" for k, c in enumerate(classes[:_LISTED]))
        more = len(classes) - _LISTED
        log.info("%s: %d classes of %r: %s%s", path, len(classes), target, shown,
                 f", ... and {more} more" if more > 0 else "")  # fmt: skip
    index = {c: k for k, c in enumerate(classes)}
    for i, name in enumerate(names):
        if name not in index:
            raise DataFileError(
                f"{path}: column {target!r}, row {i + 1}: label {name!r} is not one of the "
                f"classes {_listing(classes)}"
            )
    return np.array([index[n] for n in names], dtype=np.int64), classes


def read_table(
    path: str | os.PathLike[str],
    *,
    target: str | None = None,
    features: Sequence[str] | None = None,
    task: str | None = None,
    classes: Sequence[str] | None = None,
) -> Table:
    """Read one data file: features as float64, the target as floats or class indices.

    The format follows the suffix (:data:`FILE_FORMATS`, case-insensitive): ``.csv``
    (comma-separated, header row), ``.tsv`` (tab-separated), ``.parquet`` (needs pyarrow), or
    ``.npz`` (arrays ``x`` (N, D) or (N,) and ``y`` (N,); features are named by an optional
    array ``names`` of D strings, else ``x0, x1, ...``; the target ``y``).

    Features must be real numbers or booleans (read as 0/1); a categorical column counts as its
    values (numbers pass, strings do not). Nothing is coerced silently: a repeated column name,
    and a used column of complex numbers or of dates, times or durations are refused, so convert
    such a column yourself (e.g. to seconds since an origin). Rows in messages are data rows
    counted from 1: "row 3" is the third data row after the header; long lists of labels or
    columns in messages and logs are cut after the first few.

    Args:
        path: the file.
        target: the target column; required for CSV, TSV and Parquet; NPZ: ``None`` or ``"y"``.
        features: the feature columns in order; default: every column but the target.
        task: ``"regression"`` or ``"classification"``; default: inferred from the target's
            dtype: floats -> regression, integers, booleans and strings -> classification.
            Pass ``task="regression"`` for an integer-valued regression target (e.g. ratings).
        classes: a given label mapping (index ``k`` -> label ``classes[k]``), e.g. the training
            file's for a test file; implies classification. Default: the distinct labels in
            sorted order (numeric order for numbers, string order for strings).

    Raises:
        DataFileError: unknown suffix, no such file, a file with no rows or only one, a repeated
            column name, a missing target or feature column, a used column of complex numbers
            or of dates, times or durations, a missing, non-numeric or infinite value in a used
            column, a constant regression target, a single class, more classes than
            :data:`MAX_CLASS_SHARE` of the rows (classes inferred from the file), a label not in
            ``classes``, or a ``task`` that is not one of :data:`TASKS`.
    """
    return _read(path, target=target, features=features, task=task, classes=classes)


def read_inputs(
    path: str | os.PathLike[str], features: Sequence[str]
) -> tuple[np.ndarray, pd.DataFrame]:
    """Read the inputs of a file of rows to predict at: columns ``features`` (a fitted model's,
    in its order) as finite float64 ``(N, D)``, beside the file's rows as read (every column,
    for writing the predictions next to them). Other columns, a target among them, are left
    alone; a single row is enough.

    Raises:
        DataFileError: the file's format, a missing feature column, or a missing, non-numeric or
            infinite value in one, as :func:`read_table` words them.
    """
    path = str(path)
    suffix = _suffix(path)
    if not os.path.isfile(path):
        raise DataFileError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise DataFileError(f"{path}: the file has no rows (it is empty)")
    frame = _read_frame(path, suffix, targets=False)
    used = [str(f) for f in features]
    _columns(path, frame, used, "feature")
    if len(frame) == 0:
        raise DataFileError(f"{path}: the file has no rows")
    for column in used:
        _refuse_kind(path, frame, column)
    return np.column_stack([_numeric(path, frame, c) for c in used]), frame


def array_table(
    x: np.ndarray, y: np.ndarray, *, num_classes: int | None, name: str, held_out: bool = False
) -> Table:
    """A :class:`Table` of checked arrays in memory (a model's data), as :func:`read_table`
    makes of a file: ``num_classes`` None for regression, else ``y`` holds class indices;
    ``name`` stands for the file in messages. A classification target has its classes
    checked as a file's are (:data:`MAX_CLASS_SHARE`), unless ``held_out`` (a test set, whose
    classes are the training set's)."""
    if num_classes is None:
        return Table(x, y, "regression", (), "y", None, name, "")
    if not held_out:
        labels = [int(v) for v in y]
        _check_class_count(name, "y", len(set(labels)), labels)
    classes = tuple(str(k) for k in range(num_classes))
    return Table(x, y, "classification", (), "y", classes, name, "")
