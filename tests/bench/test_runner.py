"""The runner: one process per cell, failure isolation, timeouts, resume, atomic results."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ppl_bnn.bench import executors
from ppl_bnn.bench.cell import Cell, base_record
from ppl_bnn.bench.record import (
    PREDICTIONS_FILE,
    read_attempts,
    read_record,
    read_records,
    write_attempt,
    write_record,
)
from ppl_bnn.bench.runner import plan, run_suite
from ppl_bnn.defaults import MAX_ATTEMPTS
from ppl_bnn.devices import cpu_count
from ppl_bnn.files import import_arviz
from tests.bench.conftest import FAST_SVI, tiny_suite, write_netcdf

#: A timeout no cell meets, even in a warm worker that has its programs compiled: the cell is
#: killed while it loads its data, before it could compile (and write a JAX cache entry).
TOO_SHORT = 0.01

pytestmark = pytest.mark.runtime(120)  # seconds on 2 cores: started first (tests/conftest.py)


def _cells(results: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in read_records(results)}


def test_failing_cell_does_not_stop_the_sweep_and_resume_skips_done_cells(
    tmp_path: Path, empty_data_dir: Path, jax_cache: str
) -> None:
    suite = tiny_suite(datasets=[{"name": "sine"}, {"name": "bostonHousing"}])
    results = tmp_path / "results"
    summary = run_suite(suite, results, jobs=2, data_dir=str(empty_data_dir), jax_cache=jax_cache)
    records = _cells(results)
    ok, failed = (
        records["sine-split0-svi-numpyro-seed0"],
        records["bostonHousing-split0-svi-numpyro-seed0"],
    )
    assert ok["status"] == "ok" and failed["status"] == "failed"
    assert not summary.ok and summary.failed_cells == [failed["cell_id"]]
    assert failed["error"]["type"] == "DatasetNotFoundError"
    assert (
        "Traceback" in failed["error"]["traceback"]
        and str(empty_data_dir) in failed["error"]["message"]
    )
    assert ok["metrics"]["test_ll"] < 0 and ok["timings"]["cell_wall"] > 0
    assert (
        ok["config"]["options"] == FAST_SVI
        and ok["config_hash"] == Cell.from_dict({**suite.cells()[0].to_dict()}).config_hash()
    )
    idata = import_arviz().from_netcdf(results / "cells" / ok["cell_id"] / "inference_data.nc")
    assert idata.posterior["w0"].shape[:2] == (1, FAST_SVI["num_draws"])
    suite_file = json.loads((results / "suite.json").read_text())
    assert suite_file["wall_s"] > 0 and len(suite_file["cells"]) == 2

    assert ok["attempt"] == failed["attempt"] == 1

    again = run_suite(
        suite, results, jobs=2, data_dir=str(empty_data_dir), retry=False, jax_cache=jax_cache
    )
    assert again.skipped == 2 and not again.ok  # the failed cell is kept, and still reported
    assert _cells(results) == records

    # By default a failed cell is tried again, and its record counts the runs.
    rerun = run_suite(suite, results, jobs=2, data_dir=str(empty_data_dir), jax_cache=jax_cache)
    assert rerun.skipped == 1 and rerun.failed_cells == [failed["cell_id"]]
    after = _cells(results)
    assert after[ok["cell_id"]] == ok
    assert after[failed["cell_id"]]["attempt"] == 2
    assert after[failed["cell_id"]]["started_at"] >= failed["started_at"]
    assert not [p for p in (results / "cells").iterdir() if p.name.startswith(".")]


def test_plan_reruns_changed_failed_or_forced_cells(tmp_path: Path) -> None:
    cells = tiny_suite(seeds=[0, 1, 2, 3]).cells()
    for cell, status in zip(cells, ["ok", "diverged", "failed", "timeout"], strict=True):
        write_record(tmp_path / cell.cell_id, {"cell_id": cell.cell_id, "status": status,
                                               "config_hash": cell.config_hash(),
                                               "metrics": {"test_ll": -1.0}})  # fmt: skip
    todo, kept = plan(cells, tmp_path, retry=False)
    assert not todo and len(kept) == 4
    todo, _ = plan(cells, tmp_path)  # failures are retried by default
    assert [c.seed for c in todo] == [2, 3]
    todo, _ = plan(cells, tmp_path, force=True)
    assert len(todo) == 4
    # A failure that has had its runs is kept, unless asked for another.
    for cell in cells[2:]:
        record = read_record(tmp_path / cell.cell_id)
        write_record(tmp_path / cell.cell_id, {**record, "attempt": MAX_ATTEMPTS})
    todo, kept = plan(cells, tmp_path)
    assert not todo and [r["attempt"] for r in kept[2:]] == [MAX_ATTEMPTS] * 2
    todo, _ = plan(cells, tmp_path, retry=False, rerun_failed=True)
    assert [c.seed for c in todo] == [2, 3]
    changed = tiny_suite(seeds=[0], methods={"svi": {**FAST_SVI, "num_steps": 51}}).cells()
    assert plan(changed, tmp_path)[0] == changed


def test_plan_counts_a_failed_rerun_of_a_changed_cell_as_failed(tmp_path: Path) -> None:
    (cell,) = tiny_suite().cells()
    (changed,) = tiny_suite(methods={"svi": {**FAST_SVI, "num_steps": 51}}).cells()
    write_record(tmp_path / cell.cell_id, {"cell_id": cell.cell_id, "status": "ok",
                                           "config_hash": cell.config_hash(),
                                           "metrics": {"test_ll": -1.0}})  # fmt: skip
    assert plan([changed], tmp_path)[0] == [changed]
    # The rerun with the new configuration failed and left the earlier result in place.
    write_attempt(tmp_path / cell.cell_id, {"cell_id": cell.cell_id, "status": "timeout",
                                            "config_hash": changed.config_hash()})  # fmt: skip
    todo, kept = plan([changed], tmp_path, retry=False)
    assert not todo and [r["status"] for r in kept] == ["timeout"]
    assert plan([changed], tmp_path)[0] == [changed]
    assert plan([cell], tmp_path)[1][0]["status"] == "ok"


def _modes(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
        for p in [folder, *folder.rglob("*")]
    }


def test_a_forced_rerun_that_fails_keeps_the_earlier_result(tmp_path: Path, jax_cache: str) -> None:
    results = tmp_path / "results"
    assert run_suite(tiny_suite(), results, jobs=1, jax_cache=jax_cache).ok
    (ok,) = read_records(results)
    cell_dir = results / "cells" / ok["cell_id"]
    files = {p.name: p.read_bytes() for p in cell_dir.iterdir()}
    # The fit as FitResult.load reads it (a guide's variational.nc too), its predictions, record.
    assert set(files) == {
        "record.json", "inference_data.nc", "fit.json", "variational.nc", "predictions.nc",
    }  # fmt: skip

    summary = run_suite(tiny_suite(timeout_s=TOO_SHORT), results, jobs=1, force=True)
    assert summary.failed_cells == [ok["cell_id"]]  # the rerun failed: the sweep says so
    assert {p.name: p.read_bytes() for p in cell_dir.iterdir() if p.is_file()} == files
    (attempt,) = read_attempts(cell_dir)
    assert attempt["status"] == "timeout" and attempt["kept"] == "ok"
    assert not [p for p in (results / "cells").iterdir() if p.name.startswith(".")]
    # Group- and world-readable, for Dask workers and colleagues running as other users.
    modes = _modes(cell_dir)
    assert modes == {name: 0o755 if (cell_dir / name).is_dir() else 0o644 for name in modes}, modes
    attempt_file = next((cell_dir / "attempts").iterdir()).name
    assert set(modes) == {".", *files, "attempts", f"attempts/{attempt_file}"}

    again = run_suite(tiny_suite(), results, jobs=1, rerun_failed=True, jax_cache=jax_cache)
    assert again.skipped == 1 and again.ok and read_record(cell_dir) == ok


def test_timeout_kills_the_cell_and_records_it(tmp_path: Path) -> None:
    results = tmp_path / "results"
    summary = run_suite(tiny_suite(timeout_s=TOO_SHORT), results, jobs=1)
    (record,) = read_records(results)
    assert record["status"] == "timeout"
    assert f"exceeded its {TOO_SHORT:g} s limit" in record["error"]["message"]
    assert summary.failed_cells == [record["cell_id"]]
    assert sorted(p.name for p in (results / "cells" / record["cell_id"]).iterdir()) == [
        "record.json"
    ]


def test_a_datasets_own_timeout_is_the_one_applied(tmp_path: Path, jax_cache: str) -> None:
    datasets = [{"name": "sine", "timeout_s": TOO_SHORT}, {"name": "gap"}]
    results = tmp_path / "results"
    # The sine cell is killed before it could compile anything (see TOO_SHORT).
    summary = run_suite(tiny_suite(datasets=datasets), results, jobs=1, jax_cache=jax_cache)
    records = _cells(results)
    sine, gap = records["sine-split0-svi-numpyro-seed0"], records["gap-split0-svi-numpyro-seed0"]
    assert sine["status"] == "timeout" and sine["timeout_s"] == TOO_SHORT
    assert f"exceeded its {TOO_SHORT:g} s limit" in sine["error"]["message"]
    assert gap["status"] == "ok" and gap["timeout_s"] == 240  # the suite's
    assert summary.failed_cells == [sine["cell_id"]]
    planned = json.loads((results / "suite.json").read_text())["cells"]
    assert {(c["dataset"], c["timeout_s"]) for c in planned} == {("sine", TOO_SHORT), ("gap", 240)}


def test_diverged_cell_is_recorded_as_such(tmp_path: Path, jax_cache: str) -> None:
    methods = {"sgld": {"num_burnin": 50, "num_samples": 5, "thinning": 1, "step_size": 1e3}}
    results = tmp_path / "results"
    summary = run_suite(tiny_suite(methods=methods), results, jobs=1, jax_cache=jax_cache)
    (record,) = read_records(results)
    assert record["status"] == "diverged" and record["error"]["type"] == "DivergedError"
    assert summary.ok  # divergence is a result of the method, not a failure of the sweep


def test_killing_the_sweep_loses_nothing_written(tmp_path: Path) -> None:
    suite_file = tmp_path / "two.toml"
    suite_file.write_text(
        'name = "two"\nseeds = [0, 1]\nbackends = ["numpyro"]\n'
        '[model]\nhidden = [4]\n[[datasets]]\nname = "sine"\n'
        "[methods.svi]\nnum_steps = 50\nnum_draws = 20\n"
    )
    command = [sys.executable, "-m", "ppl_bnn.cli", "bench", "--suite", str(suite_file),
               "--reports-dir", str(tmp_path), "--jobs", "1", "--no-report"]  # fmt: skip
    proc = subprocess.Popen(command, stderr=subprocess.DEVNULL, start_new_session=True)
    results = tmp_path / "two"
    deadline = time.monotonic() + 180
    while not read_records(results) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = read_records(results)
    assert len(done) == 1
    for record in done:
        assert record["status"] == "ok"
        cell_dir = results / "cells" / record["cell_id"]
        assert (cell_dir / "inference_data.nc").is_file() and (
            cell_dir / "predictions.nc"
        ).is_file()
    time.sleep(2.5)  # orphaned workers notice their parent is gone within a second
    assert {r["cell_id"] for r in read_records(results)} == {r["cell_id"] for r in done}

    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(done)} skipped as already done" in resumed.stderr
    final = _cells(results)
    assert len(final) == 2
    for record in done:
        assert final[record["cell_id"]] == record
    assert read_record(results / "cells" / "missing") is None


@pytest.mark.filterwarnings("ignore:.*:DeprecationWarning:distributed")
def test_dask_executor_on_a_local_cluster(tmp_path: Path, jax_cache: str) -> None:
    from distributed import LocalCluster

    # Dask's worker processes are daemonic, as deployed: the pool starts its workers there too.
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        summary = run_suite(
            tiny_suite(), tmp_path, dask_address=cluster.scheduler_address, jax_cache=jax_cache
        )
    (record,) = read_records(tmp_path)
    assert summary.ok and record["status"] == "ok"
    assert record["threads"] == cpu_count()  # one task per worker: the worker's cores


def test_unreachable_dask_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT", "2s")
    with pytest.raises(ConnectionError, match="cannot reach the Dask scheduler"):
        run_suite(tiny_suite(), tmp_path, dask_address="tcp://127.0.0.1:9")


@pytest.mark.parametrize("reply", [None, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
def test_a_server_that_is_not_a_dask_scheduler_is_refused_within_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reply: bytes | None
) -> None:
    """A TCP server that accepts and says nothing, or answers HTTP (a dashboard's port)."""
    monkeypatch.setattr(executors, "DASK_CONNECT_TIMEOUT", "1s")
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                accepted.append(conn)
                if reply is not None:
                    conn.recv(65536)
                    conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    start = time.monotonic()
    try:
        with pytest.raises(ConnectionError, match=f"Dask scheduler at {address}"):
            run_suite(tiny_suite(), tmp_path / "results", dask_address=address)
    finally:
        server.close()
        for conn in accepted:
            conn.close()
    assert time.monotonic() - start < 20
    # Nothing of the failed client is left as the process's scheduler (xarray would take its
    # file locks from it, and reach for the address that failed).
    import dask
    import distributed

    assert dask.config.get("scheduler", None) != "dask.distributed"
    with pytest.raises(ValueError, match="No clients found"):
        distributed.default_client()


def test_done_means_complete_a_result_with_a_part_missing_is_run_again(tmp_path: Path) -> None:
    (cell,) = tiny_suite(seeds=[0]).cells()
    folder = tmp_path / cell.cell_id
    folder.mkdir()
    record = {**base_record(cell), "status": "ok", "metrics": {"test_ll": -1.0}}
    record["files"] = {"predictions": PREDICTIONS_FILE}
    write_record(folder, record)
    predictions = write_netcdf(folder / PREDICTIONS_FILE)
    todo, kept = plan([cell], tmp_path)
    assert not todo and [k["cell_id"] for k in kept] == [cell.cell_id]
    write_record(folder, {**record, "metrics": {}})  # a record cut before its metrics
    assert plan([cell], tmp_path)[0] == [cell]
    write_record(folder, record)
    write_netcdf(predictions, truncate=True)
    assert plan([cell], tmp_path)[0] == [cell]
    predictions.unlink()
    assert plan([cell], tmp_path)[0] == [cell]
    # A diverged cell without metrics (its fit broke down before any) is a whole result.
    write_record(folder, {**record, "status": "diverged", "metrics": {}, "files": {}})
    assert plan([cell], tmp_path)[0] == []


def test_a_record_this_version_cannot_read_is_kept_when_its_cell_runs_again(
    tmp_path: Path, jax_cache: str, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tiny_suite(seeds=[0])
    (cell,) = suite.cells()
    folder = tmp_path / "results" / "cells" / cell.cell_id
    folder.mkdir(parents=True)
    newer = json.dumps({"schema_version": 2, "cell_id": cell.cell_id, "status": "ok"})
    (folder / "record.json").write_text(newer)
    assert run_suite(suite, tmp_path / "results", jobs=1, jax_cache=jax_cache).ok
    assert read_record(folder)["status"] == "ok"
    (kept,) = (folder / "replaced").iterdir()
    assert kept.read_text() == newer
    assert "schema version 2, not 1; it is kept as replaced/record-" in caplog.text
