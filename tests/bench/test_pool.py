"""Warm workers: cells share a worker process, faults take down only their own, results are
the same as in a new process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppl_bnn.bench import pool
from ppl_bnn.bench.cell import Probe
from ppl_bnn.bench.record import read_records
from ppl_bnn.bench.reference_jobs import PendingReference
from ppl_bnn.bench.runner import run_suite, sweep_backends
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.engine.xla import XLA_OPTIMISATION_FLAGS
from ppl_bnn.reference import REFERENCE_BACKEND
from tests.bench.conftest import tiny_suite
from tests.bench.faulty_worker import FAULTS_VAR

pytestmark = pytest.mark.runtime(90)  # seconds on 2 cores: started first (tests/conftest.py)


@pytest.fixture
def new_pool() -> Iterator[None]:
    """No idle worker from an earlier test, and none left for a later one."""
    pool.shutdown()
    yield
    pool.shutdown()


def _by_id(results: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in read_records(results)}


def test_seeds_of_a_program_share_a_worker_and_its_compiled_programs(
    tmp_path: Path, jax_cache: str, new_pool: None
) -> None:
    results = tmp_path / "results"
    assert run_suite(tiny_suite(seeds=[0, 1, 2]), results, jobs=2, jax_cache=jax_cache).ok
    records = [_by_id(results)[f"sine-split0-svi-numpyro-seed{k}"] for k in range(3)]
    assert len({r["worker"]["pid"] for r in records}) == 1
    assert [r["worker"]["task"] for r in records] == [1, 2, 3]
    assert records[0]["worker"]["start_s"] > 0 and records[1]["worker"]["start_s"] == 0
    for later in records[1:]:  # nothing left for XLA to compile
        assert later["compilation"]["xla_compiles"] == 0
    for record in records:
        timings = record["timings"]
        assert 0 < timings["overhead"] < timings["cell_wall"]
        assert timings["overhead"] == pytest.approx(timings["cell_wall"] - timings["total"])


@pytest.mark.parametrize("backend", backend_names())
def test_a_warm_worker_gives_the_result_of_a_new_one(
    tmp_path: Path, jax_cache: str, new_pool: None, backend: str
) -> None:
    suite = tiny_suite(seeds=[0, 1], backends=[backend])
    warm = tmp_path / "warm"
    assert run_suite(suite, warm, jobs=1, jax_cache=jax_cache).ok
    pool.shutdown()
    new = tmp_path / "new"  # seed 1 alone, in a new worker
    cell = f"sine-split0-svi-{backend}-seed1"
    assert run_suite(tiny_suite(seeds=[1], backends=[backend]), new, jobs=1,
                     jax_cache=jax_cache).ok  # fmt: skip
    warm_record, new_record = _by_id(warm)[cell], _by_id(new)[cell]
    assert warm_record["worker"]["task"] == 2 and new_record["worker"]["task"] == 1
    timed = ("s_per_step", "s_per_grad", "ess_per_s")  # measured times, not results
    assert {k: v for k, v in warm_record["metrics"].items() if k not in timed} == {
        k: v for k, v in new_record["metrics"].items() if k not in timed
    }


def test_a_suites_xla_optimisation_compiles_its_cells_on_a_worker_of_their_own(
    tmp_path: Path, jax_cache: str, new_pool: None
) -> None:
    """A cell of the suite's level runs on a worker started with it, and its record names the
    flags XLA compiled it with; the same cell of a suite without a level runs on another
    worker, with the process's flags."""
    results = tmp_path / "results"
    suite = tiny_suite(xla_optimisation="low")
    assert run_suite(suite, results, jobs=1, jax_cache=jax_cache).ok
    record = _by_id(results)["sine-split0-svi-numpyro-seed0"]
    assert record["config"]["xla_optimisation"] == "low"
    flags = record["xla_flags"].split()
    assert set(XLA_OPTIMISATION_FLAGS["low"]) <= set(flags)
    assert "--xla_backend_optimization_level=0" not in flags  # the tests' own level, replaced
    plain = tmp_path / "plain"
    assert run_suite(tiny_suite(), plain, jobs=1, jax_cache=jax_cache).ok
    other = _by_id(plain)["sine-split0-svi-numpyro-seed0"]
    assert other["worker"]["pid"] != record["worker"]["pid"]
    assert "xla_optimisation" not in other["config"]
    other_flags = other["xla_flags"].split()  # the process's own: the tests' level
    assert "--xla_backend_optimization_level=0" in other_flags
    assert "--xla_backend_optimization_level=1" not in other_flags


def test_a_worker_is_retired_after_its_task_limit_or_memory_ceiling(
    tmp_path: Path, jax_cache: str, new_pool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "MAX_TASKS", 2)
    results = tmp_path / "tasks"
    assert run_suite(tiny_suite(seeds=[0, 1, 2]), results, jobs=1, jax_cache=jax_cache).ok
    pids = [_by_id(results)[f"sine-split0-svi-numpyro-seed{k}"]["worker"]["pid"] for k in range(3)]
    assert pids[0] == pids[1] != pids[2]

    monkeypatch.setattr(pool, "MAX_TASKS", 40)
    monkeypatch.setattr(pool, "MEMORY_CEILING", 1e-9)  # every worker is over it
    results = tmp_path / "memory"
    assert run_suite(tiny_suite(seeds=[0, 1]), results, jobs=1, jax_cache=jax_cache).ok
    assert len({r["worker"]["pid"] for r in read_records(results)}) == 2


def test_a_cell_that_kills_its_worker_loses_no_other_cell_and_the_worker_is_replaced(
    tmp_path: Path, jax_cache: str, new_pool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faults in the middle of one program's seeds: the worker exits with ``os._exit``,
    segfaults, or hangs and is killed at the timeout; the cells after each run in a new
    worker. (The faults strike before a cell compiles anything, so the JAX cache is safe.)"""
    faults = {
        "sine-split0-svi-numpyro-seed1": "exit",
        "sine-split0-svi-numpyro-seed2": "segfault",
        "sine-split0-svi-numpyro-seed3": "hang",
    }
    monkeypatch.setattr(pool, "WORKER_MODULE", "tests.bench.faulty_worker")
    monkeypatch.setenv(FAULTS_VAR, json.dumps(faults))
    suite = tiny_suite(seeds=[0, 1, 2, 3, 4], timeout_s=15)
    results = tmp_path / "results"
    summary = run_suite(suite, results, jobs=1, jax_cache=jax_cache)
    records = [_by_id(results)[f"sine-split0-svi-numpyro-seed{k}"] for k in range(5)]
    assert sorted(summary.failed_cells) == sorted(faults)
    exited, crashed, hung = records[1:4]
    assert exited["status"] == "failed" and exited["error"]["type"] == "WorkerCrashed"
    assert exited["error"]["message"] == (
        "the worker process died running a cell with status 3 without writing a record"
    )
    assert crashed["status"] == "failed" and "(SIGSEGV)" in crashed["error"]["message"]
    assert hung["status"] == "timeout" and "exceeded its 15 s limit" in hung["error"]["message"]
    first, last = records[0], records[4]
    assert first["status"] == last["status"] == "ok"
    assert last["worker"]["task"] == 1 and last["worker"]["pid"] != first["worker"]["pid"]
    assert last["metrics"]["test_ll"] < 0
    assert not [p for p in (results / "cells").iterdir() if p.name.startswith(".")]


class _Stub:
    """What the pool reads of a worker, without a process."""

    def __init__(self, host_devices: int, thread: int) -> None:
        self.profile = pool.Profile(1, host_devices)
        self.thread, self.tasks, self.alive, self.stopped = thread, 1, True, False
        self.start_seconds = 1.0

    def resident_bytes(self) -> int:
        return 0

    def stop(self) -> None:
        self.stopped = True


def test_idle_workers_a_thread_gets_its_own_back_and_the_longest_idle_is_retired(
    new_pool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 1)  # two idle workers at most
    me = threading.get_ident()
    oldest, other, mine = _Stub(1, me + 1), _Stub(2, me + 1), _Stub(2, me)
    for worker in (oldest, other, mine):
        pool.release(worker)  # type: ignore[arg-type]
    assert oldest.stopped and not other.stopped and not mine.stopped
    # A cell that runs anywhere (Pyro's) takes this thread's worker, not another's.
    assert pool.acquire(pool.Profile(1)) is mine and mine.start_seconds == 0.0
    pool.release(mine)  # type: ignore[arg-type]
    assert pool.acquire(pool.Profile(1, 2)) is mine
    assert pool.acquire(pool.Profile(1, 2)) is other and other.thread == me


# --- what the fork server imports --------------------------------------------------------------


def test_a_sweep_names_the_backends_its_references_and_cells_run_on(tmp_path: Path) -> None:
    def cells(backends: list[str]) -> list:
        return [(cell, tmp_path) for cell in tiny_suite(backends=backends).cells()]

    assert sweep_backends([], cells(["numpyro"])) == ("numpyro",)
    assert sweep_backends([], cells(["pyro", "numpyro"])) == ("numpyro", "pyro")
    jobs = tiny_suite(backends=["pyro"], reference={"engine": "mclmc"}).references()
    references = [PendingReference(job, key="") for job in jobs]
    assert sweep_backends(references, []) == (REFERENCE_BACKEND,)
    assert sweep_backends(references, cells(["pyro"])) == tuple(sorted({REFERENCE_BACKEND, "pyro"}))
    probe = Probe("perf", "overhead", "overhead", {})
    assert sweep_backends([], [*cells(["numpyro"]), (probe, tmp_path)]) is None


def _fork_server_environment(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment the fork server would start with (it is not started)."""
    seen: dict[str, str] = {}
    monkeypatch.setattr(pool.forkserver, "ensure_running", lambda: seen.update(os.environ))
    pool._start_fork_server()
    return seen


def test_the_fork_server_imports_the_backends_of_the_sweep_that_starts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pool, "_preload", None)
    monkeypatch.delenv(pool.PRELOAD_VAR, raising=False)
    assert pool.PRELOAD_VAR not in _fork_server_environment(monkeypatch)  # every backend
    pool.preload_backends(("numpyro",))
    assert _fork_server_environment(monkeypatch)[pool.PRELOAD_VAR] == "numpyro"
    assert pool.PRELOAD_VAR not in os.environ  # only the fork server's
    monkeypatch.setenv(pool.PRELOAD_VAR, "numpyro,pyro")  # the user's (the tests') choice wins
    assert _fork_server_environment(monkeypatch)[pool.PRELOAD_VAR] == "numpyro,pyro"


class _Captured(Exception):
    """Raised by a stand-in for the worker process, to stop the worker before it starts."""


def test_each_worker_preloads_the_backends_the_fork_server_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's ``preload`` reads the variable from the environment it is given: without
    it, a worker of NumPyro cells imported torch and Pyro too (1.4 s of each start)."""
    environments = []

    def process(*, args, **kwargs):
        environments.append(args[4])
        raise _Captured

    monkeypatch.setattr(pool.forkserver, "ensure_running", lambda: None)
    monkeypatch.setattr(pool._FORK_SERVER, "Process", process)
    monkeypatch.setattr(pool, "_preload", None)
    monkeypatch.delenv(pool.PRELOAD_VAR, raising=False)
    pool.preload_backends(("numpyro",))
    with pytest.raises(_Captured):
        pool.WarmWorker(pool.Profile(threads=1))
    assert environments[0][pool.PRELOAD_VAR] == "numpyro"
    monkeypatch.setenv(pool.PRELOAD_VAR, "numpyro,pyro")
    with pytest.raises(_Captured):
        pool.WarmWorker(pool.Profile(threads=1))
    assert environments[1][pool.PRELOAD_VAR] == "numpyro,pyro"


@pytest.mark.parametrize("named", ["numpyro,jaxx", "", "numpyro,"])
def test_an_unknown_backend_to_preload_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    monkeypatch.setenv(pool.PRELOAD_VAR, named)
    started = []
    monkeypatch.setattr(pool.forkserver, "ensure_running", lambda: started.append(True))
    with pytest.raises(ValueError, match=r"PPL_BNN_PRELOAD_BACKENDS=.* not a backend: give"):
        pool._start_fork_server()
    assert not started


@pytest.mark.parametrize(("named", "torch_imported"), [("numpyro", False), (None, True)])
def test_a_preloaded_worker_imports_only_the_named_backends(
    named: str | None, torch_imported: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if k != pool.PRELOAD_VAR}
    if named is not None:
        env[pool.PRELOAD_VAR] = named
    code = (
        "import sys\n"
        "from ppl_bnn.bench.worker import preload\n"
        "preload()\n"
        "print('torch' in sys.modules, 'jax' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
        cwd=Path(__file__).resolve().parents[2], timeout=300,
    )  # fmt: skip
    assert out.stdout.split() == [str(torch_imported), "True"]
