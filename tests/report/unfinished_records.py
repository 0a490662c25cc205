"""Stored records of a comparison on one dataset ``d`` (no fits, no files): cells that failed or
timed out as a worker leaves them, or contestants that finished with known test LL and cost; and
the reference posterior that failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.record import write_record
from tests.report.builder import _record, write_reference, write_suite

MEMORY = "not enough memory for 'map' on this network: it needs at least 44.7 GiB"
#: The note of a reference whose worker overran its start limit (the runner's wording).
CRASH = "WorkerCrashed: the worker process overran its 300 s limit starting"


def _cell(method: str, backend: str, seed: int = 0) -> Cell:
    return Cell("tiny", "d", 0, method, backend, seed, model={"hidden": [4]})


def _write(root: Path, cell: Cell, **fields: Any) -> Cell:
    write_record(root / "cells" / cell.cell_id, _record(cell, **fields))
    return cell


def write_failed(root: Path) -> Path:
    """A results folder whose two cells produced nothing: map on NumPyro failed (out of memory),
    svi on Pyro timed out; each with a wall time, no metrics."""
    error = {"type": "InsufficientMemoryError", "message": MEMORY, "traceback": "Traceback"}
    timeout = {"type": "Timeout", "message": "the cell exceeded its 60 s limit", "traceback": ""}
    cells = [
        _write(root, _cell("map", "numpyro"), status="failed", error=error,
               timings={"cell_wall": 0.1}),
        _write(root, _cell("svi", "pyro"), status="timeout", error=timeout,
               timings={"cell_wall": 60.0}),
    ]  # fmt: skip
    write_suite(root, cells)
    return root


def write_ranked(root: Path, reference: dict[str, Any] | None = None) -> Path:
    """A results folder of two contestants with two seeds each that finished (svi on Pyro the
    better), and split 0's ``reference.json`` with the fields of ``reference`` (none without)."""
    cells = []
    for method, backend, test_ll in (("map", "numpyro", -1.5), ("svi", "pyro", -1.0)):
        for seed in (0, 1):
            scores = {"test_ll": test_ll + 0.01 * seed, "rmse": 0.5}
            timings = {"total": 2.0 + seed, "cell_wall": 3.0}
            cells.append(
                _write(root, _cell(method, backend, seed), metrics=scores, timings=timings)
            )
    write_suite(root, cells)
    if reference is not None:
        write_reference(root, "d", 0, None, **reference)
    return root
