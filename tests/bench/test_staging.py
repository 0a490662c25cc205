"""Staging folders in a sweep: cleaned up only when their owner is gone, an old result put back
where a killed install left it aside, installed folders readable by all."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from ppl_bnn.bench.runner import run_suite
from ppl_bnn.bench.staging import install
from ppl_bnn.files import staging_dir
from tests.bench.conftest import FAST_SVI, tiny_suite

# A method of the suite that no dataset runs: the sweep runs no cell.
NO_CELLS = {"method": {"map"}}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _folder(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "record.json").write_text(text)
    return path


def test_a_sweep_cleans_up_only_what_killed_processes_left(tmp_path: Path) -> None:
    cells = tmp_path / "results" / "cells"
    live = staging_dir(cells / "a")  # this process's: another sweep's or a Dask worker's
    host, dead = live.name.split("~")[2], _dead_pid()
    assert live.name.startswith(f".a~stage~{host}~{os.getpid()}~")
    killed = _folder(cells / f".a~stage~{host}~{dead}~beef", "half")
    remote = _folder(cells / f".a~stage~other-host~{dead}~beef", "remote")
    # Killed between moving the old result aside and moving the new one in.
    aside = _folder(cells / f".b~old~{host}~{dead}~beef", "ok")
    suite = tiny_suite(
        methods={"svi": dict(FAST_SVI), "map": {}}, datasets=[{"name": "sine", "exclude": ["map"]}]
    )
    run_suite(suite, tmp_path / "results", only=NO_CELLS)
    assert live.is_dir() and remote.is_dir()
    assert not killed.exists() and not aside.exists()
    assert (cells / "b" / "record.json").read_text() == "ok"


def test_install_replaces_the_folder_and_makes_it_readable_by_all(tmp_path: Path) -> None:
    final = _folder(tmp_path / "cell", "old")
    staging = staging_dir(final)
    (staging / "sub").mkdir(mode=0o700)
    for path in (staging / "record.json", staging / "sub" / "data.nc"):
        path.write_text("new")
        path.chmod(0o600)
    staging.chmod(0o700)
    install(staging, final)
    assert (final / "record.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell"]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [final, *final.rglob("*")]}
    assert modes == {"cell": 0o755, "sub": 0o755, "record.json": 0o644, "data.nc": 0o644}
