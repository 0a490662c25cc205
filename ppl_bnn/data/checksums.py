"""SHA-256 manifest of the data files, and verification of files against it.

The manifest ``sha256sums.txt`` (next to this module, ``sha256sum`` format, paths relative to the
data directory) lists every file of the 7 UCI sets and the 8 MNIST / Fashion-MNIST IDX files, as
copied byte for byte from their sources (see ``shared/data/README.md``). From a data directory,
``sha256sum -c .../ppl_bnn/data/sha256sums.txt`` checks a whole copy.

Hashes of files already verified are cached per process, keyed by path, size and modification
time, so loading the same split twice hashes its files once.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from importlib import resources
from pathlib import Path

from ppl_bnn.data.errors import corrupt

MANIFEST_NAME = "sha256sums.txt"

#: File groups of the manifest: the first path component of each entry.
GROUPS = ("uci", "mnist", "fashion-mnist")

_CHUNK = 1 << 20
_lock = threading.Lock()
_verified: dict[tuple[str, int, int], str] = {}


@functools.cache
def manifest() -> dict[str, str]:
    """The manifest: path relative to the data directory -> lower-case hex SHA-256."""
    text = resources.files("ppl_bnn.data").joinpath(MANIFEST_NAME).read_text(encoding="utf-8")
    entries: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64:
            raise RuntimeError(f"{MANIFEST_NAME} line {number} is malformed: {line!r}")
        entries[rel.removeprefix("./")] = digest.lower()
    return entries


def group_files(group: str) -> list[str]:
    """Manifest paths (relative to the data directory) of one group, in manifest order.

    Raises:
        ValueError: ``group`` is not one of :data:`GROUPS`.
    """
    if group not in GROUPS:
        raise ValueError(f"unknown data group {group!r}; known groups: {', '.join(GROUPS)}")
    return [rel for rel in manifest() if rel.split("/", 1)[0] == group]


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_file(path: Path, rel: str, data_dir: Path) -> bool:
    """Check ``path`` against the manifest entry ``rel``.

    Args:
        path: the file on disk (it must exist).
        rel: its path relative to the data directory, as written in the manifest.
        data_dir: the data directory (named in the error message).

    Returns:
        ``True`` if the manifest lists ``rel`` and the hash matches; ``False`` if the manifest does
        not list ``rel`` (e.g. a UCI set that is not one of the 7 known ones): nothing to check.

    Raises:
        DatasetCorruptError: the hash differs from the manifest's.
    """
    expected = manifest().get(rel)
    if expected is None:
        return False
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _lock:
        actual = _verified.get(key)
    if actual is None:
        actual = sha256_file(path)
    if actual != expected:
        group = rel.split("/", 1)[0]
        raise corrupt(
            path, f"SHA-256 is {actual}, the manifest expects {expected} for {rel}", group, data_dir
        )
    with _lock:
        _verified[key] = actual
    return True
