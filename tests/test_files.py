"""Atomic writes leave files with the mode a plain ``open`` gives them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
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


def test_arviz_is_imported_without_its_preview_notices() -> None:
    script = (
        "import logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from ppl_bnn.files import import_arviz\n"
        "import_arviz()\n"
    )
    out = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert "arviz_base not installed" not in out.stderr
    assert "undergoing" not in out.stderr
