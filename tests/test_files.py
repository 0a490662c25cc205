"""Atomic writes leave files with the mode a plain ``open`` gives them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ppl_bnn.files import write_atomic


def test_write_atomic_gives_the_umask_mode_not_the_temporary_files(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        target = tmp_path / "out.txt"
        write_atomic(target, lambda tmp: Path(tmp).write_text("x"))
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(old)
    assert target.read_text() == "x"
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o640
