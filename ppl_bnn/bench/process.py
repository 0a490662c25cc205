"""Run one cell in a warm worker process (:mod:`ppl_bnn.bench.pool`) with a timeout, staging its
files until they are complete.

The worker writes into a staging directory beside the cell's final directory (see
:func:`ppl_bnn.files.staging_dir`); only when it has finished (or has been recorded as timed out or
crashed), and the caller has added what it adds (a reference's ``reference.json``), does the
staging directory replace the final one. An earlier result is therefore never half-overwritten,
and killing a sweep loses nothing already written.

A run that failed or timed out never replaces a complete (``ok`` or ``diverged``) result: its
record is kept beside it as an attempt (:func:`ppl_bnn.bench.record.write_attempt`), so a forced
rerun that crashes leaves the earlier result in place. A complete result of other data than the
new run's is never overwritten: it is set aside (:mod:`ppl_bnn.bench.replaced`).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppl_bnn.bench import pool
from ppl_bnn.bench.cell import Cell, Probe, base_record, cell_from_dict
from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.pool import Profile, WorkerLost
from ppl_bnn.bench.record import (
    COMPLETE,
    RECORD_FILE,
    REPLACED_DIR,
    RecordError,
    load_record,
    next_attempt,
    read_record,
    write_attempt,
    write_record,
)
from ppl_bnn.bench.replaced import set_aside
from ppl_bnn.bench.staging import install, share
from ppl_bnn.devices import cpu_count
from ppl_bnn.engine.registry import declaration
from ppl_bnn.files import staging_dir
from ppl_bnn.methods import get_method

logger = logging.getLogger(__name__)

#: The ``chain_method`` values that run a sampler's chains in parallel on host devices.
PARALLEL_CHAIN_METHODS = ("auto", "parallel")


def dask_threads() -> int | None:
    """Cores per task on the Dask worker running this code, or None outside Dask."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    return max(1, cpu_count() // max(1, worker.state.nthreads))


def _finish(
    staging: Path, final: Path, record: dict[str, Any], results_dir: Path | None
) -> dict[str, Any]:
    """Install ``staging`` as ``final``, unless ``record`` failed and ``final`` holds a complete
    result: then keep that result, add the record to its attempts and return the record with
    ``kept``, the status of the result kept. A complete result of other data than ``record``'s
    (:func:`_other_data`) is set aside into ``results_dir`` first, where one is given."""
    earlier = read_record(final)
    complete = earlier is not None and earlier.get("status") in COMPLETE
    if complete and record["status"] not in COMPLETE:
        record = {**record, "kept": earlier["status"]}
        share(write_attempt(final, record).parent)
        shutil.rmtree(staging, ignore_errors=True)
        logger.warning(
            "%s: this run %s; the earlier %s result is kept", final.name, record["status"],
            earlier["status"],
        )  # fmt: skip
        return record
    if complete and results_dir is not None and (why := _other_data(earlier, record)):
        set_aside(final, results_dir, "cells", f"refitted on other data ({why})")
    _keep_unreadable_record(final, staging)
    install(staging, final)
    return record


def _other_data(earlier: dict[str, Any], record: dict[str, Any]) -> str | None:
    """How the data of ``earlier``'s fit differs from ``record``'s, or None where they are the
    same: by the SHA-256 of the arrays each was fit on, or, for a record written before runs
    kept it, by the dataset, split and data settings of their configurations."""
    old, new = earlier.get("data_sha256"), record.get("data_sha256")
    if old and new:
        return None if old == new else f"data SHA-256 {old[:12]}..., now {new[:12]}..."
    before, after = earlier.get("config") or {}, record.get("config") or {}
    changed = [key for key in ("dataset", "split", "data") if before.get(key) != after.get(key)]
    return f"its {' and '.join(changed)} changed" if changed else None


def _keep_unreadable_record(final: Path, staging: Path) -> None:
    """A ``record.json`` in ``final`` that this version cannot read (from a newer schema, or
    damaged) is copied into ``staging``'s ``replaced/`` before ``staging`` takes ``final``'s
    place, and the copy is named in the log: nothing is overwritten unseen."""
    path = final / RECORD_FILE
    if not path.is_file():
        return
    try:
        load_record(final)
    except RecordError as err:
        kept = staging / REPLACED_DIR / f"record-{int(path.stat().st_mtime)}.json"
        kept.parent.mkdir(exist_ok=True)
        shutil.copy2(path, kept)
        logger.warning("%s: its stored %s is %s; it is kept as %s", final.name, RECORD_FILE,
                       err.reason, kept.relative_to(staging))  # fmt: skip


def cell_profile(cell: Cell | Probe, threads: int) -> Profile:
    """The worker a cell needs: ``threads``, and on a backend that runs chains in parallel
    (:attr:`~ppl_bnn.engine.registry.BackendDeclaration.parallel_chains`: NumPyro) as many host
    devices as chains where they may run in parallel on them (``chain_method`` ``"auto"`` or
    ``"parallel"``: ``nuts`` and ``hmc``), else one. A vectorised sampler (``mclmc``,
    SG-MCMC, a reference's chains) gets one device: XLA splits its thread pool between host
    devices, and 16 of them made a batch of 16 vectorised MCLMC chains on bostonHousing 2.2
    times slower on two cores. Other backends' cells run on any worker of their thread
    budget. A cell's ``xla_optimisation`` joins its profile."""
    if isinstance(cell, Probe):
        return Profile(threads, cell.host_devices(threads))
    if not declaration(cell.backend).parallel_chains:
        return Profile(threads, xla_optimisation=cell.xla_optimisation)
    fields = {f.name for f in dataclasses.fields(get_method(cell.method, cell.backend).options)}
    chain_method = cell.options.get("chain_method", "auto")
    if "chain_method" not in fields or chain_method not in PARALLEL_CHAIN_METHODS:
        return Profile(threads, 1, cell.xla_optimisation)
    return Profile(threads, max(1, int(cell.options.get("num_chains", 1))), cell.xla_optimisation)


def run_cell_process(
    cell_dict: dict[str, Any],
    out_dir: str,
    *,
    data_dir: str | None = None,
    threads: int | None = None,
    jax_cache: str | None = None,
    fit_store: str | None = None,
    results_dir: str | None = None,
    before_install: Callable[[Path, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run a cell in a warm worker of this process's pool, enforce its timeout and return its
    record.

    Plain arguments (and a picklable ``before_install``), so the function can be shipped to a
    Dask worker, whose own pool then runs it. A probe runs in a new worker of its own, which
    ends with it: probes time things, compilation included, in a process no cell warmed.

    Args:
        cell_dict: The cell or probe, as its ``to_dict()``.
        out_dir: The directory its files end up in (e.g. ``<results>/cells/<cell_id>``),
            replacing what was there unless this run failed and that is a complete result.
        data_dir, jax_cache: Passed to the worker.
        fit_store: The shared-fit store the cell reads and writes
            (:mod:`ppl_bnn.bench.fit_store`), or None.
        results_dir: The results folder a cell's result of other data is set aside in
            (:mod:`ppl_bnn.bench.replaced`); None: a reference's cache entry, whose key fixes
            its data.
        threads: The worker's thread budget (default: Dask's share of the cores, else 1).
        before_install: Called with the staging directory and the record once the record is
            written, before the directory is installed.

    Returns:
        The record of this run; with ``kept`` (the earlier result's status) when it failed and
        the earlier result was kept.
    """
    cell = cell_from_dict(cell_dict)
    threads = threads or dask_threads() or 1
    final = Path(out_dir)
    attempt = next_attempt(final, cell.config_hash())
    staging = staging_dir(final)
    started = timestamp()
    task = {"cell": cell.to_dict(), "out_dir": str(staging), "data_dir": data_dir}
    task.update(jax_cache=jax_cache, fit_store=fit_store, attempt=attempt)
    try:
        record = _run_on_worker(cell, task, cell_profile(cell, threads))
    except pool.Interrupted:
        logger.debug("%s: interrupted", cell.cell_id)
        # Not a result: no record, and a resumed sweep runs the cell again.
        shutil.rmtree(staging, ignore_errors=True)
        raise
    except WorkerLost as lost:
        record = _lost_record(cell, lost, started, threads, attempt)
        write_record(staging, record)
    if before_install is not None:
        before_install(staging, record)
    record = _finish(staging, final, record, None if results_dir is None else Path(results_dir))
    logger.info("%s: %s", cell.cell_id, record["status"])
    return record


def run_cells_process(
    cells: list[tuple[dict[str, Any], str]], **process: Any
) -> list[dict[str, Any]]:
    """Run cells one after another (:func:`run_cell_process` for each ``(cell_dict, out_dir)``),
    in one worker while it lives: given the seeds of one program, the first compiles it and the
    rest reuse it. Plain arguments, for Dask."""
    return [run_cell_process(cell, out_dir, **process) for cell, out_dir in cells]


def _run_on_worker(cell: Cell | Probe, task: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """Run ``task`` on a worker of ``profile`` (a probe's own, a cell's from the pool) and return
    the record it wrote."""
    with pool.borrowed(profile, new=isinstance(cell, Probe)) as worker:
        task["worker"] = {"task": worker.tasks + 1, "start_s": worker.start_seconds}
        worker.run(task, cell.timeout_s)
    record = read_record(Path(task["out_dir"]))
    if record is None:
        raise WorkerLost("answered", timed_out=False, returncode=None, stderr="")
    return record


def _lost_record(
    cell: Cell | Probe, lost: WorkerLost, started: str, threads: int, attempt: int
) -> dict[str, Any]:
    """The record of a cell whose worker was killed at its timeout or died."""
    record = base_record(cell, attempt)
    record.update(started_at=started, finished_at=timestamp(), threads=threads)
    if lost.timed_out:
        record["status"] = "timeout"
        message = f"the cell exceeded its {cell.timeout_s:g} s limit and was killed"
        record["error"] = {"type": "Timeout", "message": message, "traceback": lost.stderr}
    else:
        message = f"{lost} without writing a record"
        record["error"] = {"type": "WorkerCrashed", "message": message, "traceback": lost.stderr}
    return record
