"""One Ctrl-C stops a sweep within seconds, keeps what finished and leaves a folder the next
sweep resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ppl_bnn.bench import pool
from ppl_bnn.bench.record import RECORD_FILE
from tests.bench.faulty_worker import START_DELAY_VAR

pytestmark = pytest.mark.runtime(30)

SUITE = """
name = "interrupted"
seeds = [0]
backends = ["numpyro"]
timeout_s = 600
[model]
hidden = [4]
[[datasets]]
name = "sine"
no_reference = "a test"
[methods.map]
num_steps = 50
# Far more steps than the test waits for: it is running when the Ctrl-C comes.
[methods.svi]
num_steps = 50_000_000
num_draws = 10
"""


#: ``python -c`` this, then the ``ppl-bnn`` arguments: the CLI with Ctrl-C's default action, as a
#: terminal's Ctrl-C finds it, even where this test runs with SIGINT ignored (a background job
#: of a shell without job control, which its children inherit). A ``preexec_fn`` would do the
#: same but forks a process in which JAX runs threads.
WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'ppl_bnn.cli', *sys.argv[1:]])"
)


def _bench(suite: Path, reports: Path, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-c", WITH_DEFAULT_SIGINT, "bench", "--suite", str(suite)]
    command += ["--jobs", "1", "--no-reference", "--no-report", "--no-jax-cache"]
    command += ["--reports-dir", str(reports), *extra]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.2)


def test_one_ctrl_c_stops_the_sweep_at_once_and_keeps_what_finished(tmp_path: Path) -> None:
    suite = tmp_path / "interrupted.toml"
    suite.write_text(SUITE)
    reports = tmp_path / "reports"
    cells = reports / "interrupted" / "cells"
    done = cells / "sine-split0-map-numpyro-seed0" / RECORD_FILE
    running = cells / "sine-split0-svi-numpyro-seed0"
    sweep = _bench(suite, reports)
    try:
        _wait_for(done, timeout_s=180)
        time.sleep(3.0)  # the svi cell is now fitting in its worker
        finished_at = json.loads(done.read_text())["finished_at"]
        sent = time.monotonic()
        sweep.send_signal(signal.SIGINT)
        _, stderr = sweep.communicate(timeout=60)
        stopped_in = time.monotonic() - sent
    finally:  # a sweep that did not stop is not left running into the next test
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.communicate()
    assert sweep.returncode == 130, stderr
    assert stopped_in < 10, stopped_in
    assert "Traceback" not in stderr, stderr
    assert "interrupted" in stderr, stderr
    # suite.json lists the run, interrupted, with the one cell it finished.
    (run,) = json.loads((reports / "interrupted" / "suite.json").read_text())["runs"]
    assert (run["cells_run"], run["interrupted"]) == (1, True)
    # The running cell left nothing behind: no record, no staging folder.
    assert not (running / RECORD_FILE).exists()
    assert not [p for p in cells.iterdir() if p.name.startswith(".")], stderr
    # The next sweep keeps the finished cell and has only the interrupted one to run.
    again = _bench(suite, reports, "--methods", "map")
    _, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stderr
    assert "no cell ran; 1 skipped as already done" in stderr
    assert json.loads(done.read_text())["finished_at"] == finished_at


def test_a_worker_still_starting_is_ended_by_the_interrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C while a worker starts ends it then, not once it is ready (here it would take
    a minute)."""
    monkeypatch.setattr(pool, "WORKER_MODULE", "tests.bench.faulty_worker")
    monkeypatch.setenv(START_DELAY_VAR, "60")
    outcome: list[BaseException | None] = []

    def start() -> None:
        try:
            pool.WarmWorker(pool.Profile(1)).kill()
            outcome.append(None)
        except BaseException as err:  # handed to the test thread
            outcome.append(err)

    thread = threading.Thread(target=start)
    thread.start()
    try:
        _wait_until(lambda: pool._idle.starting, timeout_s=30)
        pool.interrupt()
        thread.join(timeout=20)
    finally:
        pool.allow_work()
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], pool.Interrupted), outcome
    assert not pool._idle.starting


def _wait_until(condition: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_after_an_interrupt_no_worker_starts_until_the_next_sweep() -> None:
    pool.interrupt()
    try:
        with pytest.raises(pool.Interrupted, match="interrupted"), pool.borrowed(pool.Profile(1)):
            pass
    finally:
        pool.allow_work()
