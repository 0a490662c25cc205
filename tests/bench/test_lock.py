"""Locks on results folders and reference cache entries: one holder, who it is, waiting, and a
holder killed with -9 never leaves the lock held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ppl_bnn.bench import reference_jobs
from ppl_bnn.bench.lock import LOCK_FILE, LockedError, hold_lock
from ppl_bnn.bench.reference_jobs import compute_reference
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.reference import FORMAT, write_reference
from tests.bench.conftest import tiny_suite

HOLD = """
import sys, time
from pathlib import Path
from ppl_bnn.bench.lock import hold_lock
with hold_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_second_holder_is_refused_with_the_first_named(tmp_path: Path) -> None:
    path = tmp_path / "results" / LOCK_FILE
    with hold_lock(path):
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["command"] and holder["started_at"]
        with pytest.raises(LockedError, match=rf"in use: .* held by pid {os.getpid()} on "), \
                hold_lock(path):  # fmt: skip
            pass
    assert not path.exists()  # the holder removes it
    with hold_lock(path):
        pass


def test_a_waiting_holder_gets_the_lock_when_it_is_released(tmp_path: Path) -> None:
    path = tmp_path / LOCK_FILE
    order: list[str] = []

    def second() -> None:
        with hold_lock(path, wait=True):
            order.append("second")

    with hold_lock(path):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.5)
        order.append("first released")
    thread.join(10)
    assert order == ["first released", "second"]


def test_a_holder_killed_with_minus_9_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / LOCK_FILE
    with subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE,
                          text=True) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "held\n"
            with pytest.raises(LockedError, match=f"pid {proc.pid}"), hold_lock(path):
                pass
        finally:
            proc.kill()
    assert path.exists()  # left behind, but no longer held
    with hold_lock(path):
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_a_sweep_refuses_a_results_folder_another_holds(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with hold_lock(results / LOCK_FILE), pytest.raises(LockedError, match="held by pid"):
        run_suite(tiny_suite(), results, jobs=1)
    assert not (results / "cells").exists()


def test_a_reference_computed_by_another_process_meanwhile_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fake(cell_dict: dict, entry: str, **_: Any) -> dict:
        calls.append(entry)
        return {"status": "ok"}

    monkeypatch.setattr(reference_jobs, "run_cell_process", fake)
    entry = tmp_path / "key"
    taken: list[Any] = []
    with hold_lock(tmp_path / ".key.lock"):  # another process computes it
        thread = threading.Thread(target=lambda: taken.append(compute_reference({}, str(entry),
                                                                                None)))  # fmt: skip
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive() and not calls  # waiting for it
        entry.mkdir()
        write_reference(entry, {"format": FORMAT, "status": "ok"})
    thread.join(10)
    assert taken == [None] and not calls
    assert compute_reference({}, str(tmp_path / "other"), None) == {"status": "ok"}
    assert calls == [str(tmp_path / "other")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]  # no lock files left
