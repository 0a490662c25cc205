"""A suite's data file of your own: the ``[[datasets]]`` keys that describe it, read and checked
when the suite is read, and the rows of each split written beside the results.

The file is read once and split with :func:`ppl_bnn.data.splits.split_table`, so that every
problem (a missing value, a non-numeric feature, a training split with one class) is reported
before any cell runs, with the file, column and row. What reaches the cells
(:meth:`DataFile.loader_keywords`) carries the files' SHA-256: it joins each cell's config hash,
and the loader refuses a file whose content has changed since. A model's data in memory
(:func:`ppl_bnn.compare`'s) is made into the same data file without reading anything back
(:func:`arrays_data_file`), and the NPZ bytes its cells will read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.bench.schema import SuiteError, check_open_unit
from ppl_bnn.data import dataset_names
from ppl_bnn.data.files import DataFileError, Table, array_table
from ppl_bnn.data.splits import read_tables, split_table
from ppl_bnn.files import npz_bytes, write_atomic

#: The ``[[datasets]]`` keys of a data file (besides ``name`` and ``splits``).
FILE_KEYS = ("path", "target", "features", "task", "classes", "test_fraction", "test_path")
#: Where the rows of each split of a suite's data files are written, under its results folder.
DATA_DIR = "data"
#: The held-out share of a data file's rows where neither ``test_fraction`` nor ``test_path``
#: is given.
DEFAULT_TEST_FRACTION = 0.1


@dataclass(frozen=True)
class DataFile:
    """A checked data file: where it is, what to read from it, how it is split, its content
    hash, and each split's rows (``split_info``, the loader's record of them)."""

    name: str
    path: str
    target: str | None
    features: tuple[str, ...] | None
    task: str
    classes: tuple[str, ...] | None
    test_fraction: float | None
    test_path: str | None
    splits: int
    sha256: str
    test_sha256: str | None
    split_info: tuple[dict[str, Any], ...]
    image_shape: tuple[int, ...] | None = None

    def loader_keywords(self) -> dict[str, Any]:
        """The ``file`` keywords of :func:`ppl_bnn.data.load_dataset` (JSON-ready: they are part
        of each cell's config)."""
        out: dict[str, Any] = {
            "path": self.path,
            "target": self.target,
            "features": None if self.features is None else list(self.features),
            "task": self.task,
            "sha256": self.sha256,
        }
        if self.classes is not None:
            out["classes"] = list(self.classes)
        if self.test_path is not None:
            out.update(test_path=self.test_path, test_sha256=self.test_sha256)
        else:
            out["test_fraction"] = self.test_fraction
        if self.image_shape is not None:
            out["image_shape"] = list(self.image_shape)
        return out


def data_name_problem(name: Any) -> str | None:
    """What is wrong with ``name`` as the name of a user's data (it joins the cell ids and must
    not shadow a catalogue data set), or None."""
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_.-" for c in name):
        return f"must be letters, digits, '_', '.' or '-' (it joins the cell ids), got {name!r}"
    if name in dataset_names():
        return f"{name!r} is a catalogue data set's name"
    return None


def _plain_name(loc: str, name: Any) -> str:
    problem = data_name_problem(name)
    if problem is not None:
        raise SuiteError(f"{loc}: a data file's name {problem}; give the data file another name")
    return name


def _text_list(loc: str, key: str, value: Any, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise SuiteError(f"{loc}: {key} must be a non-empty list of {what}, got {value!r}")
    return tuple(value)


def _resolve(base_dir: Path, value: Any, key: str, loc: str) -> str:
    if not isinstance(value, str) or not value:
        raise SuiteError(f"{loc}: {key} must be a file path, got {value!r}")
    path = Path(value).expanduser()
    return str((path if path.is_absolute() else base_dir / path).resolve())


def parse_data_file(loc: str, table: Mapping[str, Any], base_dir: Path) -> DataFile:
    """The data file a ``[[datasets]]`` table with ``path`` describes, read (every split) and
    checked; ``SuiteError`` naming the table and, from the loader, the file, column and row."""
    name = _plain_name(loc, table.get("name"))
    path = _resolve(base_dir, table["path"], "path", loc)
    test_path = table.get("test_path")
    if test_path is not None:
        test_path = _resolve(base_dir, test_path, "test_path", loc)
        if "test_fraction" in table:
            raise SuiteError(f"{loc}: give test_fraction or test_path, not both")
        test_fraction = None
    else:
        test_fraction = check_open_unit(loc, table, "test_fraction", DEFAULT_TEST_FRACTION)
    splits = table.get("splits", 1)
    if isinstance(splits, bool) or not isinstance(splits, int) or splits < 1:
        raise SuiteError(
            f"{loc}: a data file's splits is how many seeded random splits to run (a positive "
            f"integer), got {splits!r}"
        )
    if test_path is not None and splits != 1:
        raise SuiteError(f"{loc}: with test_path there is one split; drop splits = {splits}")
    target = table.get("target")
    if target is not None and not isinstance(target, str):
        raise SuiteError(f"{loc}: target must be a column name, got {target!r}")
    features = _text_list(loc, "features", table.get("features"), "column names")
    classes = _text_list(loc, "classes", table.get("classes"), "class labels")
    task = table.get("task")
    try:
        # The files read once, every split checked.
        read, test = read_tables(
            path, target=target, features=features, task=task, classes=classes,
            test_path=test_path,
        )  # fmt: skip
        given = {"target": target, "features": features, "classes": classes}
        return data_file_of(name, read, test, given, test_fraction=test_fraction, splits=splits)
    except DataFileError as err:
        raise SuiteError(f"{loc}: {err}") from err


def data_file_of(
    name: str,
    table: Table,
    test: Table | None,
    given: Mapping[str, Any],
    *,
    test_fraction: float | None,
    splits: int,
    image_shape: tuple[int, ...] | None = None,
) -> DataFile:
    """The :class:`DataFile` of tables read (or made) from files: each split made and checked
    as the cells' loader will make it (``given``: the target, features and classes asked for,
    as the loader is to be asked again)."""
    made = split_table(
        table, test, test_fraction=None if test else test_fraction, splits=range(splits),
        name=name,
    )  # fmt: skip
    return DataFile(
        name=name,
        path=table.path,
        target=given["target"],
        features=None if given["features"] is None else tuple(given["features"]),
        task=table.task,
        classes=None if given["classes"] is None else tuple(given["classes"]),
        test_fraction=None if test else test_fraction,
        test_path=None if test is None else test.path,
        splits=splits,
        sha256=table.sha256,
        test_sha256=None if test is None else test.sha256,
        split_info=tuple(info for _, info in made),
        image_shape=image_shape,
    )


def arrays_data_file(
    name: str,
    path: Path,
    arrays: Mapping[str, np.ndarray],
    test_arrays: Mapping[str, np.ndarray] | None,
    *,
    num_classes: int | None,
    test_fraction: float | None,
    splits: int,
) -> tuple[DataFile, dict[Path, bytes]]:
    """A model's data (``x``, ``y`` and optionally the column ``names``) as a suite's data
    file, made in memory: every split made and checked as the cells' loader will make it, and
    the NPZ bytes to write at ``path`` (and, for ``test_arrays``, beside it), the file the
    cells read. Images are written as flat rows, with their ``image_shape``. The
    :class:`DataFile` is the one :func:`parse_data_file` would read from those files, so that
    cells of the same data keep their config hash.

    Raises:
        DataFileError: a split no fit can use (see :mod:`ppl_bnn.data.splits`).
    """
    image_shape = tuple(arrays["x"].shape[1:]) if arrays["x"].ndim > 2 else None
    files, tables = {}, []
    for where, given, held_out in ((path, arrays, False), (_test_path(path), test_arrays, True)):
        if given is None:
            continue
        flat = {**given, "x": np.asarray(given["x"]).reshape(len(given["x"]), -1)}
        files[where] = npz_bytes(flat)
        table = array_table(
            flat["x"], flat["y"], num_classes=num_classes, name=str(where), held_out=held_out
        )
        names = given.get("names")
        features = tuple(f"x{j}" for j in range(flat["x"].shape[1])) if names is None else (
            tuple(str(n) for n in names)
        )  # fmt: skip
        digest = hashlib.sha256(files[where]).hexdigest()
        tables.append(replace(table, features=features, sha256=digest))
    test = tables[1] if len(tables) > 1 else None
    given = {"target": "y", "features": None, "classes": tables[0].classes}
    data_file = data_file_of(
        name, tables[0], test, given, test_fraction=test_fraction, splits=splits,
        image_shape=image_shape,
    )  # fmt: skip
    return data_file, files


def _test_path(path: Path) -> Path:
    """Where the test set of the data file at ``path`` is written."""
    return path.with_name(f"{path.stem}-test{path.suffix}")


def write_split_rows(results_dir: Path, data_file: DataFile) -> Path:
    """``<results>/data/<name>.json``: the file, its hash, its columns, its classes and the
    training and test rows of each split."""
    folder = results_dir / DATA_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{data_file.name}.json"
    text = json.dumps({"dataset": data_file.name, "splits": list(data_file.split_info)}, indent=1)
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    return path
