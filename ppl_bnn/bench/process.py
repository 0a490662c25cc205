"""Run one cell in a child process with a timeout, staging its files until they are complete.

The child writes into a staging directory beside the cell's final directory (see
:func:`ppl_bnn.files.staging_dir`); only when it has finished (or has been recorded as timed out or
crashed), and the caller has added what it adds (a reference's ``reference.json``), does the
staging directory replace the final one. An earlier result is therefore never half-overwritten,
and killing a sweep loses nothing already written.

A run that failed or timed out never replaces a complete (``ok`` or ``diverged``) result: its
record is kept beside it as an attempt (:func:`ppl_bnn.bench.record.write_attempt`), so a forced
rerun that crashes leaves the earlier result in place.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import base_record, cell_from_dict
from ppl_bnn.bench.environment import thread_environment, timestamp
from ppl_bnn.bench.record import COMPLETE, read_record, write_attempt, write_record
from ppl_bnn.bench.staging import install, share
from ppl_bnn.files import staging_dir
from ppl_bnn.runtime import cpu_count

logger = logging.getLogger(__name__)
_STDERR_TAIL = 4000


def dask_threads() -> int | None:
    """Cores per task on the Dask worker running this code, or None outside Dask."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    return max(1, cpu_count() // max(1, worker.state.nthreads))


def _finish(staging: Path, final: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Install ``staging`` as ``final``, unless ``record`` failed and ``final`` holds a complete
    result: then keep that result, add the record to its attempts and return the record with
    ``kept``, the status of the result kept."""
    earlier = read_record(final) if record["status"] not in COMPLETE else None
    if earlier is None or earlier.get("status") not in COMPLETE:
        install(staging, final)
        return record
    record = {**record, "kept": earlier["status"]}
    share(write_attempt(final, record).parent)
    shutil.rmtree(staging, ignore_errors=True)
    logger.warning(
        "%s: this run %s; the earlier %s result is kept", final.name, record["status"],
        earlier["status"],
    )  # fmt: skip
    return record


def run_cell_process(
    cell_dict: dict[str, Any],
    out_dir: str,
    *,
    data_dir: str | None = None,
    threads: int | None = None,
    jax_cache: str | None = None,
    before_install: Callable[[Path, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run a cell in a fresh Python process, enforce its timeout and return its record.

    Plain arguments (and a picklable ``before_install``), so the function can be shipped to a
    Dask worker.

    Args:
        cell_dict: The cell or probe, as its ``to_dict()``.
        out_dir: The directory its files end up in (e.g. ``<results>/cells/<cell_id>``),
            replacing what was there unless this run failed and that is a complete result.
        data_dir, threads, jax_cache: Passed to the worker.
        before_install: Called with the staging directory and the record once the record is
            written, before the directory is installed.

    Returns:
        The record of this run; with ``kept`` (the earlier result's status) when it failed and
        the earlier result was kept.
    """
    cell = cell_from_dict(cell_dict)
    threads = threads or dask_threads() or 1
    final = Path(out_dir)
    staging = staging_dir(final)
    command = [sys.executable, "-m", "ppl_bnn.bench.worker", json.dumps(cell.to_dict())]
    command += [str(staging), "--threads", str(threads), "--parent-pid", str(os.getpid())]
    if data_dir:
        command += ["--data-dir", str(data_dir)]
    if jax_cache:
        command += ["--jax-cache", str(jax_cache)]
    started = timestamp()
    env = {**os.environ, **thread_environment(threads)}
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # the timeout kills the worker and anything it started
    )
    try:
        _, stderr = proc.communicate(timeout=cell.timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        timed_out = True
    record = read_record(staging)
    if record is None:
        record = base_record(cell)
        record["started_at"] = started
        record["finished_at"] = timestamp()
        record["threads"] = threads
        if timed_out:
            record["status"] = "timeout"
            record["error"] = {
                "type": "Timeout",
                "message": f"the cell exceeded its {cell.timeout_s:g} s limit and was killed",
                "traceback": (stderr or "")[-_STDERR_TAIL:],
            }
        else:
            record["error"] = {
                "type": "WorkerCrashed",
                "message": f"the worker process exited with status {proc.returncode} "
                "without writing a record",
                "traceback": (stderr or "")[-_STDERR_TAIL:],
            }
        write_record(staging, record)
    if before_install is not None:
        before_install(staging, record)
    record = _finish(staging, final, record)
    logger.info("%s: %s", cell.cell_id, record["status"])
    return record
