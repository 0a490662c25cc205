"""A user's own data file as a data set: CSV, TSV, Parquet or NPZ.

:func:`read_table` reads one file into a checked :class:`Table` (float features, a float or
integer-label target); :func:`load_file_split` turns it into a :class:`RawData` train/test split,
either by a seeded random split of its rows (:func:`split_rows`) or with a second file as the test
set. Every problem with the data raises :class:`DataFileError`, whose message names the file and,
where it applies, the column and row.

Rows in messages are data rows counted from 1, as a user counts them in the file: "row 3" is the
third data row after the header (blank lines of a CSV/TSV are skipped and not counted). Row numbers
in the ``info`` dict of :func:`load_file_split` are 0-based indices of the same rows.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.data.prepare import RawData

log = logging.getLogger(__name__)

#: File suffixes :func:`read_table` reads (case-insensitive).
FILE_FORMATS: tuple[str, ...] = (".csv", ".tsv", ".parquet", ".npz")

#: The tasks a file can hold.
TASKS: tuple[str, ...] = ("regression", "classification")

_CHUNK = 1 << 20
#: Spawn key of the row-split stream, so it is independent of the subset streams of
#: :func:`ppl_bnn.data.prepare.subset_generators` (children of the same ``(seed, split)``).
_SPLIT_KEY = (zlib.crc32(b"ppl_bnn.data.files.split_rows"),)


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
    """

    x: np.ndarray
    y: np.ndarray
    task: str
    features: tuple[str, ...]
    target: str
    classes: tuple[str, ...] | None
    path: str
    sha256: str


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


def _read_npz(path: str) -> pd.DataFrame:
    """Arrays ``x`` ((N, D) or (N,)) and ``y`` ((N,)) of an NPZ file as columns x0.., y."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = sorted(archive.files)
            if "x" not in names or "y" not in names:
                raise DataFileError(
                    f"{path}: an NPZ data file needs arrays 'x' and 'y'; "
                    f"it has {', '.join(repr(n) for n in names) or 'none'}"
                )
            x, y = archive["x"], archive["y"]
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        if isinstance(exc, DataFileError):
            raise
        raise DataFileError(f"{path}: cannot read it as an NPZ file ({exc})") from exc
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataFileError(f"{path}: array 'x' must be (N, D) or (N,), got shape {x.shape}")
    if y.ndim != 1:
        raise DataFileError(f"{path}: array 'y' must be (N,), got shape {y.shape}")
    if len(x) != len(y):
        raise DataFileError(f"{path}: 'x' has {len(x)} rows but 'y' has {len(y)}")
    columns = {f"x{j}": x[:, j] for j in range(x.shape[1])}
    columns["y"] = y
    return pd.DataFrame(columns)


def _read_frame(path: str, suffix: str) -> pd.DataFrame:
    """The file's rows as a DataFrame with string column names."""
    if suffix == ".npz":
        return _read_npz(path)
    if suffix == ".parquet":
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
    frame.columns = [str(c) for c in frame.columns]
    if len(set(frame.columns)) != len(frame.columns):
        raise DataFileError(f"{path}: repeated column names: {', '.join(frame.columns)}")
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
    raise DataFileError(f"{where}: {what} {values[i]!r}")


def _numeric(path: str, frame: pd.DataFrame, column: str) -> np.ndarray:
    """Column ``column`` as finite float64; booleans count as 0/1.

    Raises :class:`DataFileError` naming the first row with a missing, non-numeric or infinite
    value.
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
        values = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=np.float64)
        _first_problem(path, column, missing, np.isnan(values) & ~missing, raw, "not a number:")
    _first_problem(path, column, missing, np.isinf(values), values, "infinite value")
    return values


def _label_str(value: Any) -> str:
    """A class label as a string: integral floats without ``.0`` (so 1 and 1.0 agree)."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, np.floating):
        return repr(float(value))
    return str(value)


def _labels(path: str, frame: pd.DataFrame, column: str) -> list[Any]:
    """The target column's labels as Python objects; raises for a missing label."""
    series = frame[column]
    missing = pd.isna(series).to_numpy()
    raw = series.astype(object).to_numpy()
    _first_problem(path, column, missing, np.zeros_like(missing), raw, "")
    return list(raw)


def _sorted_labels(labels: list[Any]) -> list[str]:
    """Distinct labels as strings, sorted numerically if all are numbers, else as strings."""
    distinct = set(labels)
    if all(isinstance(v, int | float | np.integer | np.floating | np.bool_) for v in distinct):
        return list(dict.fromkeys(_label_str(v) for v in sorted(distinct, key=float)))
    return sorted({_label_str(v) for v in distinct})


def _infer_task(dtype: Any) -> str:
    """Float target: regression; anything else (integers, booleans, strings): classification."""
    if pd.api.types.is_float_dtype(dtype):
        return "regression"
    return "classification"


def _columns(path: str, frame: pd.DataFrame, names: Sequence[str], what: str) -> None:
    """Raise naming every name of ``names`` that is not a column of ``frame``."""
    absent = [n for n in names if n not in frame.columns]
    if absent:
        plural = "s" if len(absent) > 1 else ""
        raise DataFileError(
            f"{path}: no {what} column{plural} {', '.join(repr(n) for n in absent)}; "
            f"the columns are {', '.join(repr(c) for c in frame.columns)}"
        )


def _read(
    path: str | os.PathLike[str],
    *,
    target: str | None,
    features: Sequence[str] | None,
    task: str | None,
    classes: Sequence[str] | None,
) -> tuple[Table, tuple[str, ...]]:
    """:func:`read_table`, also returning all the file's column names."""
    path = str(path)
    suffix = _suffix(path)
    if task is not None and task not in TASKS:
        raise DataFileError(
            f"{path}: task must be one of {', '.join(repr(t) for t in TASKS)}, got {task!r}"
        )
    if classes is not None:
        if task == "regression":
            raise DataFileError(f"{path}: classes are given, but the task is 'regression'")
        classes = tuple(str(c) for c in classes)
        if len(set(classes)) != len(classes) or not classes:
            raise DataFileError(f"{path}: classes must be distinct and not empty: {classes}")
        task = "classification"
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
            f"the columns are {', '.join(repr(c) for c in columns)}"
        )
    _columns(path, frame, [target], "target")
    if features is None:
        used = tuple(c for c in columns if c != target)
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
    if len(frame) == 0:
        raise DataFileError(f"{path}: the file has no rows")
    if len(frame) < 2:
        raise DataFileError(f"{path}: the file has only 1 row; at least 2 are needed")

    x = np.column_stack([_numeric(path, frame, c) for c in used])
    if task is None:
        task = _infer_task(frame[target].dtype)
        log.info(
            "%s: task %s, inferred from the %s dtype of target %r",
            path,
            task,
            frame[target].dtype,
            target,
        )
    if task == "regression":
        y = _numeric(path, frame, target)
        if np.ptp(y) == 0:
            raise DataFileError(
                f"{path}: constant target: column {target!r} is {y[0]:g} in every row"
            )
        return Table(x, y, task, used, target, None, path, sha256), columns

    labels = _labels(path, frame, target)
    names = [_label_str(v) for v in labels]
    if classes is None:
        classes = tuple(_sorted_labels(labels))
        if len(classes) < 2:
            raise DataFileError(
                f"{path}: column {target!r} has a single class ({classes[0]!r}); "
                "classification needs at least 2"
            )
        log.info(
            "%s: %d classes of %r: %s",
            path,
            len(classes),
            target,
            ", ".join(f"{k}={c!r}" for k, c in enumerate(classes)),
        )
    index = {c: k for k, c in enumerate(classes)}
    for i, name in enumerate(names):
        if name not in index:
            raise DataFileError(
                f"{path}: column {target!r}, row {i + 1}: label {name!r} is not one of the "
                f"classes {', '.join(repr(c) for c in classes)}"
            )
    y = np.array([index[n] for n in names], dtype=np.int64)
    return Table(x, y, task, used, target, tuple(classes), path, sha256), columns


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
    ``.npz`` (arrays ``x`` (N, D) or (N,) and ``y`` (N,); features are named ``x0, x1, ...``, the
    target ``y``).

    Features must be numbers or booleans (0/1). Rows in messages are data rows counted from 1:
    "row 3" is the third data row after the header.

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
        DataFileError: unknown suffix, no such file, a file with no rows or only one, a missing
            target or feature column, a missing, non-numeric or infinite value in a used column,
            a constant regression target, a single class, a label not in ``classes``, or a
            ``task`` that is not one of :data:`TASKS`.
    """
    return _read(path, target=target, features=features, task=task, classes=classes)[0]


def _check_fraction(test_fraction: float) -> float:
    """``test_fraction`` as a float in (0, 1); ``ValueError`` otherwise."""
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, int | float | np.number):
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    if not 0 < float(test_fraction) < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    return float(test_fraction)


def _check_index(label: str, value: int) -> None:
    """``ValueError`` unless ``value`` (a seed or split number) is a non-negative int."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{label} must be a non-negative integer, got {value!r}")


def split_rows(
    n: int,
    *,
    test_fraction: float,
    split: int,
    seed: int = 0,
    y: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``range(n)`` into sorted int64 ``(train_idx, test_idx)``.

    The stream is ``default_rng(SeedSequence((seed, split), spawn_key=...))`` with a key of its
    own: fixed for a given ``(seed, split)``, different across splits, and independent of the
    subset streams of :func:`ppl_bnn.data.prepare.subset_generators`.

    Without ``y`` the test set has ``max(1, round(test_fraction * n))`` rows (at most ``n - 1``).
    With ``y`` (integer class labels, length ``n``) the split is stratified: each class of
    ``m`` rows gives ``round(test_fraction * m)`` of them to the test set, but at most ``m - 1``,
    so every class stays in the training set (a class of one row stays there whole). If that
    makes the test set empty, one row of the largest class that can spare one moves to it.

    Raises:
        ValueError: ``test_fraction`` not in (0, 1), ``n < 2``, a negative ``seed`` or ``split``,
            or ``y`` not 1-D integer labels of length ``n``.
    """
    fraction = _check_fraction(test_fraction)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n must be an integer >= 2 to split rows, got {n!r}")
    _check_index("seed", seed)
    _check_index("split", split)
    rng = np.random.default_rng(
        np.random.SeedSequence((int(seed), int(split)), spawn_key=_SPLIT_KEY)
    )
    if y is None:
        n_test = min(max(1, round(fraction * n)), n - 1)
        perm = rng.permutation(n)
        test = perm[:n_test]
    else:
        y = np.asarray(y)
        if y.shape != (n,) or not (
            np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.bool_)
        ):
            raise ValueError(
                f"y must be {n} integer class labels, got shape {y.shape} dtype {y.dtype}"
            )
        labels, counts = np.unique(y, return_counts=True)
        take = np.array([min(round(fraction * m), m - 1) for m in counts], dtype=np.int64)
        if take.sum() == 0:
            spare = np.where(counts - take >= 2, counts, 0)
            take[int(np.argmax(spare if spare.any() else counts))] += 1
        parts = [
            rng.permutation(np.flatnonzero(y == label))[:k]
            for label, k in zip(labels, take, strict=True)
        ]
        test = np.concatenate(parts)
    test = np.sort(test).astype(np.int64)
    train = np.setdiff1d(np.arange(n, dtype=np.int64), test, assume_unique=True)
    return train, test


def load_file_split(
    path: str | os.PathLike[str],
    *,
    target: str | None = None,
    features: Sequence[str] | None = None,
    task: str | None = None,
    test_fraction: float | None = None,
    test_path: str | os.PathLike[str] | None = None,
    split: int = 0,
    seed: int = 0,
    name: str | None = None,
    classes: Sequence[str] | None = None,
) -> tuple[RawData, dict[str, Any]]:
    """A data file as a train/test split in original units, and a record of how it was made.

    Give exactly one of ``test_fraction`` (a random split of the file's rows by
    :func:`split_rows` from ``(seed, split)``, stratified by class for classification) and
    ``test_path`` (a second file read with the same target, features, task and class mapping;
    it must have the same columns). ``name`` (optional) prefixes the source line. ``classes``:
    the class labels in index order (as for :func:`read_table`), where a class may be missing
    from the file.

    Returns:
        ``(raw, info)``: the :class:`RawData`, and a JSON-serialisable dict with keys ``path``,
        ``sha256``, ``target``, ``features``, ``task``, ``classes``, ``test_path`` and
        ``test_sha256`` (with a test file), ``test_fraction``, ``seed``, ``split``, and
        ``train_rows`` / ``test_rows`` (0-based indices of the data rows of the training file,
        and of the test file when one is given).

    Raises:
        DataFileError: both or neither of ``test_fraction`` and ``test_path``, ``test_fraction``
            not in (0, 1), a negative ``seed`` or ``split``, a test file whose columns differ or
            that holds a label outside the training classes, a classification training set with
            a single class, or any problem of :func:`read_table`.
    """
    return load_file_splits(
        path, target=target, features=features, task=task, test_fraction=test_fraction,
        test_path=test_path, splits=[split], seed=seed, name=name, classes=classes,
    )[0]  # fmt: skip


def load_file_splits(
    path: str | os.PathLike[str],
    *,
    target: str | None = None,
    features: Sequence[str] | None = None,
    task: str | None = None,
    test_fraction: float | None = None,
    test_path: str | os.PathLike[str] | None = None,
    splits: Sequence[int] = (0,),
    seed: int = 0,
    name: str | None = None,
    classes: Sequence[str] | None = None,
) -> list[tuple[RawData, dict[str, Any]]]:
    """:func:`load_file_split` of each of ``splits``, the files read once."""
    path = str(path)
    if (test_fraction is None) == (test_path is None):
        given = "neither" if test_fraction is None else "both"
        raise DataFileError(f"{path}: give exactly one of test_fraction and test_path, got {given}")
    try:
        if test_fraction is not None:
            test_fraction = _check_fraction(test_fraction)
        _check_index("seed", seed)
        for split in splits:
            _check_index("split", split)
    except ValueError as exc:
        raise DataFileError(f"{path}: {exc}") from exc
    table, columns = _read(path, target=target, features=features, task=task, classes=classes)
    test = None
    if test_path is not None:
        test_path = str(test_path)
        test, test_columns = _read(
            test_path,
            target=table.target,
            features=table.features,
            task=table.task,
            classes=table.classes,
        )
        if features is None and set(test_columns) != set(columns):
            extra = sorted(set(test_columns) - set(columns))
            absent = sorted(set(columns) - set(test_columns))
            raise DataFileError(
                f"{test_path}: its columns differ from those of the training file {path}: "
                f"extra {extra}, missing {absent}"
            )
    return [
        _split(
            path, table, test, test_fraction=test_fraction, split=int(split), seed=seed, name=name
        )
        for split in splits
    ]


def _split(
    path: str,
    table: Table,
    test: Table | None,
    *,
    test_fraction: float | None,
    split: int,
    seed: int,
    name: str | None,
) -> tuple[RawData, dict[str, Any]]:
    """One split of a read file: the test file's rows, or the split's random test rows."""
    info: dict[str, Any] = {
        "path": path,
        "sha256": table.sha256,
        "target": table.target,
        "features": list(table.features),
        "task": table.task,
        "classes": None if table.classes is None else list(table.classes),
    }
    source = f"file {path} (sha256 {table.sha256[:8]}...), target {table.target!r}"
    if test is not None:
        x_train, y_train, x_test, y_test = table.x, table.y, test.x, test.y
        train_rows = np.arange(len(table.y))
        test_rows = np.arange(len(test.y))
        info.update(test_path=test.path, test_sha256=test.sha256)
        source += f", test file {test.path} (sha256 {test.sha256[:8]}...)"
    else:
        labels = table.y if table.task == "classification" else None
        train_rows, test_rows = split_rows(
            len(table.y), test_fraction=test_fraction, split=split, seed=seed, y=labels
        )
        x_train, y_train = table.x[train_rows], table.y[train_rows]
        x_test, y_test = table.x[test_rows], table.y[test_rows]
        if table.task == "classification" and np.unique(y_train).size < 2:
            raise DataFileError(
                f"{path}: the training rows of split {split} hold a single class "
                f"({table.classes[int(y_train[0])]!r}); classification needs at least 2"
            )
        source += f", split {split} (test fraction {test_fraction:g}, seed {seed})"
    if len(test_rows) == 0:
        raise DataFileError(f"{path}: the test set of split {split} is empty")
    info.update(
        test_fraction=test_fraction,
        seed=int(seed),
        split=int(split),
        train_rows=[int(i) for i in train_rows],
        test_rows=[int(i) for i in test_rows],
    )
    raw = RawData(
        task=table.task,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=None if table.classes is None else len(table.classes),
        source=f"{name}: {source}" if name else source,
    )
    return raw, info
