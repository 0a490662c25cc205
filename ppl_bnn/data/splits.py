"""A data file's rows as train/test splits: seeded random splits of its rows
(:func:`split_rows`, stratified by class), or a second file as the test set
(:func:`load_file_split`).

Every split is checked as it is made, so that a split no fit could use is refused with the file
and split named (:class:`~ppl_bnn.data.files.DataFileError`) before any cell runs: an empty test
set, a training set of one class, or a regression target that is constant over the training
rows (a test share that leaves one training row, say).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ppl_bnn.data.files import DataFileError, Table, read_table
from ppl_bnn.data.prepare import RawData

#: Spawn key of the row-split stream, so it is independent of the subset streams of
#: :func:`ppl_bnn.data.prepare.subset_generators` (children of the same ``(seed, split)``).
_SPLIT_KEY = (zlib.crc32(b"ppl_bnn.data.files.split_rows"),)


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
    _check_split_arguments(path, test_fraction, test_path, splits, seed)
    table, test = read_tables(
        path, target=target, features=features, task=task, classes=classes, test_path=test_path
    )
    return split_table(
        table, test, test_fraction=test_fraction, splits=splits, seed=seed, name=name
    )


def read_tables(
    path: str | os.PathLike[str],
    *,
    target: str | None = None,
    features: Sequence[str] | None = None,
    task: str | None = None,
    classes: Sequence[str] | None = None,
    test_path: str | os.PathLike[str] | None = None,
) -> tuple[Table, Table | None]:
    """A data file (:func:`read_table`) and its test file, if one is given, read with the
    training file's target, features, task and classes; without ``features`` the two files
    must have the same columns (:class:`DataFileError` naming the difference)."""
    table = read_table(path, target=target, features=features, task=task, classes=classes)
    if test_path is None:
        return table, None
    test = read_table(
        str(test_path),
        target=table.target,
        features=table.features,
        task=table.task,
        classes=table.classes,
    )
    if features is None and set(test.columns) != set(table.columns):
        extra = sorted(set(test.columns) - set(table.columns))
        absent = sorted(set(table.columns) - set(test.columns))
        raise DataFileError(
            f"{test_path}: its columns differ from those of the training file {path}: "
            f"extra {extra}, missing {absent}"
        )
    return table, test


def _check_split_arguments(
    path: str,
    test_fraction: float | None,
    test: object,
    splits: Sequence[int],
    seed: int,
) -> None:
    """:class:`DataFileError` naming ``path`` unless exactly one of ``test_fraction`` (in
    (0, 1)) and a test set is given, and ``seed`` and ``splits`` are non-negative integers."""
    if (test_fraction is None) == (test is None):
        given = "neither" if test_fraction is None else "both"
        raise DataFileError(f"{path}: give exactly one of test_fraction and test_path, got {given}")
    try:
        if test_fraction is not None:
            _check_fraction(test_fraction)
        _check_index("seed", seed)
        for split in splits:
            _check_index("split", split)
    except ValueError as exc:
        raise DataFileError(f"{path}: {exc}") from exc


def split_table(
    table: Table,
    test: Table | None = None,
    *,
    test_fraction: float | None = None,
    splits: Sequence[int] = (0,),
    seed: int = 0,
    name: str | None = None,
) -> list[tuple[RawData, dict[str, Any]]]:
    """Each of ``splits`` of a read (or :func:`~ppl_bnn.data.files.array_table`) table, as
    :func:`load_file_split` makes them: ``test``'s rows as the test set, or the split's seeded
    random ``test_fraction`` of the rows; every split checked (see the module docstring)."""
    _check_split_arguments(table.path, test_fraction, test, splits, seed)
    fraction = None if test_fraction is None else float(test_fraction)
    return [
        _split(table, test, test_fraction=fraction, split=int(split), seed=seed, name=name)
        for split in splits
    ]


def _split(
    table: Table,
    test: Table | None,
    *,
    test_fraction: float | None,
    split: int,
    seed: int,
    name: str | None,
) -> tuple[RawData, dict[str, Any]]:
    """One split of a read file: the test file's rows, or the split's random test rows."""
    path = table.path
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
    if table.task == "regression" and np.ptp(y_train) == 0:
        rows = f"{len(y_train)} training row{'s' * (len(y_train) != 1)}"
        raise DataFileError(
            f"{path}: the target is {y_train[0]:g} in every one of the {rows} of split {split}: "
            "no fit can learn from it; hold out fewer rows (a smaller test_fraction)"
        )
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
