"""Small I/O helpers shared by results, benchmark records and reports."""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_atomic(path: Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)``, fsync, then rename onto ``path``: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def import_arviz() -> Any:
    """ArviZ, imported without its notice about the 1.x refactor (this stack pins 0.23)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing", category=FutureWarning)
        import arviz

    return arviz
