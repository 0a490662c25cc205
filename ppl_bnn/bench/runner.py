"""Run a suite's cells, resuming from what is already stored.

Results live in ``<results_dir>/cells/<cell_id>/`` (see :mod:`ppl_bnn.bench.record`) with
``<results_dir>/suite.json`` describing the sweep. A cell is skipped when its stored record has
the same config hash and status ``ok`` or ``diverged`` (a divergence is a result of the method,
reproducible from the seed); ``failed`` and ``timeout`` cells are kept as they are unless
``rerun_failed``; ``force`` reruns everything.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.environment import environment
from ppl_bnn.bench.executors import dask_executor, local_executor
from ppl_bnn.bench.process import run_cell_process
from ppl_bnn.bench.record import read_record
from ppl_bnn.bench.suite import Suite
from ppl_bnn.files import write_atomic
from ppl_bnn.runtime import cpu_count
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)
COMPLETE = ("ok", "diverged")
FAILED = ("failed", "timeout")


@dataclass
class SweepSummary:
    """What a sweep did: counts by status, cells skipped as already done, wall time."""

    statuses: Counter = field(default_factory=Counter)
    skipped: int = 0
    wall_s: float = 0.0
    failed_cells: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no cell of the suite is ``failed`` or ``timeout``."""
        return not self.failed_cells


def plan(
    cells: list[Cell], cells_dir: Path, *, rerun_failed: bool = False, force: bool = False
) -> tuple[list[Cell], list[dict[str, Any]]]:
    """Split ``cells`` into those to run and the stored records of those to skip."""
    todo, kept = [], []
    for cell in cells:
        record = None if force else read_record(cells_dir / cell.cell_id)
        if record is None or record.get("config_hash") != cell.config_hash():
            todo.append(cell)
        elif record["status"] in COMPLETE or not rerun_failed:
            kept.append(record)
        else:
            todo.append(cell)
    return todo, kept


def _clean_staging(cells_dir: Path) -> None:
    """Remove staging directories left by a sweep that was killed."""
    if cells_dir.is_dir():
        for path in cells_dir.iterdir():
            if path.name.startswith(".") and path.is_dir():
                shutil.rmtree(path, ignore_errors=True)


def _progress(total: int) -> Any:
    """A progress bar for people; none under CI or without a terminal."""
    from tqdm.auto import tqdm

    quiet = bool(os.environ.get("CI")) or not os.isatty(2)
    return tqdm(total=total, unit="cell", disable=quiet, dynamic_ncols=True)


def write_suite_file(suite: Suite, results_dir: Path, cells: list[Cell], **extra: Any) -> None:
    """``suite.json``: the suite, its cells and the environment it ran in."""
    data = {
        "name": suite.name,
        "kind": suite.kind,
        "description": suite.description,
        "reference": None if suite.reference is None else ".".join(suite.reference),
        "environment": environment(),
        "cells": [c.to_dict() for c in cells],
        **extra,
    }
    text = json.dumps(data, indent=2)
    write_atomic(results_dir / "suite.json", lambda tmp: Path(tmp).write_text(text))


def run_suite(
    suite: Suite,
    results_dir: str | Path,
    *,
    jobs: int | None = None,
    dask_address: str | None = None,
    data_dir: str | None = None,
    max_splits: int | None = None,
    only: dict[str, set[str]] | None = None,
    rerun_failed: bool = False,
    force: bool = False,
    jax_cache: str | None = None,
) -> SweepSummary:
    """Run every cell of ``suite`` that is not already done; never stop at a failing cell.

    Args:
        suite: The parsed suite.
        results_dir: Where ``cells/`` and ``suite.json`` go (``reports/<suite>``).
        jobs: Cells at once on this machine (default: the number of cores); each cell's process
            gets ``cores // jobs`` threads so that cells never oversubscribe the cores.
        dask_address: Run on this Dask scheduler instead of locally.
        data_dir: Data directory for datasets that need one.
        max_splits: Only the first splits of each dataset.
        only: Restrict to these datasets / methods / backends.
        rerun_failed: Rerun cells stored as failed or timed out.
        force: Rerun every cell.
        jax_cache: JAX persistent compilation cache directory shared by the cells.
    """
    if suite.kind == "perf":
        # Probes time things: by default one at a time, each with every core to itself.
        if dask_address:
            raise ValueError(
                f"{suite.name} is a performance suite: its probes time this machine, so they run "
                "locally (drop --dask-address)"
            )
        if (jobs or 1) > 1:
            logger.warning(
                "%s: %d performance probes at once measure each other's load; the figures are "
                "only comparable with --jobs 1 (the default for performance suites)",
                suite.name,
                jobs,
            )
        jobs = jobs or 1
    start = now()
    results = Path(results_dir)
    cells_dir = results / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    _clean_staging(cells_dir)
    cells = suite.cells(max_splits=max_splits, data_dir=data_dir, only=only)
    todo, kept = plan(cells, cells_dir, rerun_failed=rerun_failed, force=force)
    summary = SweepSummary(skipped=len(kept))
    for record in kept:
        summary.statuses[record["status"]] += 1
        if record["status"] in FAILED:
            summary.failed_cells.append(record["cell_id"])
    write_suite_file(suite, results, cells, wall_s=None)
    logger.info("%s: %d cells, %d to run, %d already done", suite.name, len(cells), len(todo),
                len(kept))  # fmt: skip

    if dask_address:
        executor_cm, threads = dask_executor(dask_address), None
    else:
        jobs = jobs or cpu_count()
        executor_cm, threads = local_executor(jobs), max(1, cpu_count() // jobs)
    with executor_cm as executor, _progress(len(todo)) as bar:
        futures = {
            executor.submit(
                run_cell_process,
                cell.to_dict(),
                str(cells_dir),
                data_dir=data_dir,
                threads=threads,
                jax_cache=jax_cache,
            ): cell
            for cell in todo
        }
        for future in as_completed(futures):
            cell = futures[future]
            try:
                status = future.result()["status"]
            except Exception:  # an executor failure must not stop the sweep
                logger.exception("%s: the executor failed to run the cell", cell.cell_id)
                status = "failed"
            summary.statuses[status] += 1
            if status in FAILED:
                summary.failed_cells.append(cell.cell_id)
            bar.set_postfix_str(f"{cell.cell_id}: {status}", refresh=False)
            bar.update()
    summary.wall_s = now() - start
    write_suite_file(suite, results, cells, wall_s=summary.wall_s)
    return summary
