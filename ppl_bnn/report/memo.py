"""What the report's memos have in common: keys from files' sizes and modification times and
from source code, and entries written whole or not at all.

A render keeps what is costly to compute again (each cell's distances to its reference,
:mod:`ppl_bnn.report.fidelity`; each dataset's figures, :mod:`ppl_bnn.report.figure_memo`) in
the results folder's ``report-cache/``, keyed by everything it was computed from. A file's key
is its size and modification time (not its content: hashing every predictions file would cost
what the memo saves), and the code's key a hash of its source, so that an edited metric
forgets what the old one computed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ppl_bnn.files import write_atomic

logger = logging.getLogger(__name__)

#: Where a results folder keeps what its renders computed (relative to the folder).
CACHE_DIR = Path("report-cache")


def file_key(path: Path | None) -> list[int] | None:
    """``[size, modification time in ns]`` of ``path``, None where it cannot be read."""
    try:
        stat = path.stat() if path is not None else None
    except OSError:
        return None
    return None if stat is None else [stat.st_size, stat.st_mtime_ns]


def folder_key(folder: Path) -> list[tuple[str, int, int]]:
    """``(name, size, modification time in ns)`` of every file under ``folder``; a file removed
    meanwhile gets ``-1``s, a key no later render matches."""
    out = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            size, mtime = file_key(path) or (-1, -1)
            out.append((str(path.relative_to(folder)), size, mtime))
    return out


def keep(path: Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` whole; a folder that cannot be written is left as it is (the
    next render computes the entry again)."""
    try:
        write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    except OSError as err:
        logger.debug("%s: not kept in %s (%s)", what, path, err)
