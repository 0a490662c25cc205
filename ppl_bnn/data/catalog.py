"""The names :func:`load_dataset` accepts, their split counts, and the loader itself."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ppl_bnn.data import idx, sklearn_sets, synthetic, uci
from ppl_bnn.data.dataset import Dataset
from ppl_bnn.data.files import DataFileError
from ppl_bnn.data.paths import resolve_data_dir
from ppl_bnn.data.prepare import RawData, build, check_limit
from ppl_bnn.data.splits import load_file_split

#: Sets that need no data directory: name -> loader of split k.
BUILTIN: dict[str, Callable[[int], RawData]] = {
    "sine": synthetic.sine,
    "gap": synthetic.gap,
    "diabetes": sklearn_sets.diabetes,
    "digits": sklearn_sets.digits,
}

#: Splits of each built-in set: each is a different deterministic random draw / cut.
BUILTIN_SPLITS = 20

#: Sets read from IDX files in the data directory; they have the one standard split.
IMAGE_SETS = ("mnist", "fashion-mnist")


def dataset_names() -> list[str]:
    """Every name :func:`load_dataset` accepts without a custom folder.

    Built-in sets (``sine``, ``gap``, ``diabetes``, ``digits``), then ``mnist`` and
    ``fashion-mnist``, then the 7 UCI sets. Further folders in the UCI layout under
    ``<data_dir>/uci/`` load too but are not listed.
    """
    return [*BUILTIN, *IMAGE_SETS, *uci.UCI_SETS]


def _unknown(name: str, data_dir: os.PathLike[str] | str | None) -> ValueError:
    where = resolve_data_dir(data_dir) / uci.GROUP
    return ValueError(
        f"unknown data set {name!r}; known: {', '.join(dataset_names())} "
        f"(or a folder in the UCI layout under {where})"
    )


def _is_uci(name: str, data_dir: str | os.PathLike[str] | None) -> bool:
    return name in uci.UCI_SETS or uci.has_folder(name, resolve_data_dir(data_dir))


def num_splits(name: str, data_dir: str | os.PathLike[str] | None = None) -> int:
    """How many splits ``name`` has: valid ``split`` values are ``0..num_splits-1``.

    UCI sets: read from their ``n_splits.txt`` (20; 5 for protein-tertiary-structure). Built-in
    sets: 20. ``mnist`` / ``fashion-mnist``: 1 (the standard train/test split).

    Raises:
        ValueError: unknown name.
        DatasetNotFoundError: a UCI set whose files are missing.
    """
    if name in BUILTIN:
        return BUILTIN_SPLITS
    if name in IMAGE_SETS:
        return 1
    if _is_uci(name, data_dir):
        return uci.num_splits(name, resolve_data_dir(data_dir))
    raise _unknown(name, data_dir)


def _check_split(name: str, split: object, n: int | None) -> int:
    if isinstance(split, bool) or not isinstance(split, int | np.integer):
        raise ValueError(f"split must be an integer, got {split!r}")
    if n is not None and not 0 <= split < n:
        raise ValueError(f"split must be in 0..{n - 1} for {name} ({n} splits), got {split}")
    if split < 0:
        raise ValueError(f"split must be non-negative, got {split}")
    return int(split)


def load_dataset(
    name: str,
    *,
    split: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
    max_train: int | None = None,
    max_test: int | None = None,
    seed: int = 0,
    image: bool = False,
    file: Mapping[str, Any] | None = None,
) -> Dataset:
    """Load one train/test split of a data set, standardised with training statistics.

    Example:
        >>> ds = load_dataset("sine", split=3)
        >>> ds.x_train.shape, ds.task
        ((32, 1), 'regression')

    Args:
        name: one of :func:`dataset_names`, or a folder in the UCI layout under
            ``<data_dir>/uci/``.
        split: which split, ``0..num_splits(name)-1``.
        data_dir: where the UCI / MNIST files are; see :func:`resolve_data_dir`. Not needed by the
            built-in sets.
        max_train: keep a random subset of at most this many training points.
        max_test: keep a random subset of at most this many test points (and OOD inputs).
        seed: seeds the subsets, together with ``split`` via ``SeedSequence((seed, split))``. It
            does not change the data of a split.
        image: image sets (``digits``, ``mnist``, ``fashion-mnist``, or a ``file`` with an
            ``image_shape``) only: inputs as images (N, H, W, C), e.g. (N, 28, 28, 1), for
            convolutional networks, instead of flat rows.
        file: a data file instead of a named set (``name`` is then only its label): the
            keywords of :func:`~ppl_bnn.data.splits.load_file_split` (``path``, ``target``,
            ``features``, ``task``, ``test_fraction`` or ``test_path``), and optionally the
            ``sha256`` (and ``test_sha256``) the files must still have and an ``image_shape``
            (H, W, C) of its rows, which ``image=True`` then loads as images.

    Returns:
        The :class:`Dataset`.

    Raises:
        ValueError: unknown name, split out of range, bad ``max_train`` / ``max_test`` / ``seed``,
            ``image=True`` for a set that has no images.
        DatasetNotFoundError: a needed file is missing (the message says how to get it).
        DatasetCorruptError: a file fails its checksum or does not parse.
        DataFileError: ``file`` cannot be used, or no longer has the content it was read with.
    """
    check_limit("max_train", max_train)
    check_limit("max_test", max_test)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(image, bool):
        raise ValueError(f"image must be True or False, got {image!r}")
    if file is not None:
        split = _check_split(name, split, None)
        raw = _file_split(name, split, file)
    elif name in BUILTIN:
        split = _check_split(name, split, BUILTIN_SPLITS)
        raw = BUILTIN[name](split)
    elif name in IMAGE_SETS:
        split = _check_split(name, split, 1)
        raw = idx.load(name, resolve_data_dir(data_dir))
    elif _is_uci(name, data_dir):
        split = _check_split(name, split, None)
        raw = uci.load(name, split, resolve_data_dir(data_dir))
    else:
        raise _unknown(name, data_dir)
    return build(
        name, split, raw, max_train=max_train, max_test=max_test, seed=int(seed), image=image
    )


def _file_split(name: str, split: int, file: Mapping[str, Any]) -> RawData:
    """Split ``split`` of a data file, checked to have the content the caller read it with; an
    ``image_shape`` (H, W, C) says that its rows are images of that shape, row-major."""
    kept = {k: v for k, v in file.items() if k not in ("sha256", "test_sha256", "image_shape")}
    raw, info = load_file_split(split=split, name=name, **kept)
    if file.get("image_shape") is not None:
        raw = replace(raw, image_shape=tuple(int(n) for n in file["image_shape"]))
    for key in ("sha256", "test_sha256"):
        if file.get(key) is not None and file[key] != info.get(key):
            which = file["test_path"] if key == "test_sha256" else file["path"]
            raise DataFileError(
                f"{which} has changed since it was read (SHA-256 {info.get(key)}, expected "
                f"{file[key]}): read it again so that its results are not mixed with the old ones"
            )
    return raw
