"""Where a sweep's time went, from its results folder: compiling, tuning, fitting, the cells'
own overhead, the references and the runner, and, from the command's time-stamped log,
installing and the report.

For the default suite from a fresh clone with empty caches::

    XDG_CACHE_HOME=$(mktemp -d) nox -s bench 2>&1 \\
        | python benchmarks/bench_breakdown.py --stamp > bench.log
    python benchmarks/bench_breakdown.py reports/default --log bench.log

- ``install_s``: from the start of ``nox`` to ``ppl-bnn bench`` (the log's stamps);
- ``sweep_s``: the sweep's wall time (``suite.json``'s last run); ``report_s``: what the command
  took after it (writing the report), from the log;
- summed over the cells (seconds of one core each; with ``--jobs 2`` two run at once):
  ``compile_s`` (the cells' own fits' compile seconds, loading from JAX's cache included),
  ``tuning_compile_s`` (the same for the tuning fits), ``tuning_s`` (tuning less its
  compiling), ``fitting_s`` (the cells' own fits less compiling) and ``in_cells_s`` (loading
  data, evaluating, writing files);
- ``reference_s``: the references computed by this sweep (their ``wall_s``);
- ``runner_s``: the rest of the cores' time over the sweep (jobs x sweep, less the above):
  starting workers, scheduling, and cores left idle.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any


def cell_seconds(records: list[dict[str, Any]]) -> dict[str, float]:
    """Compile, tuning, fitting and in-cell seconds summed over ``records``."""
    keys = ("compile_s", "tuning_compile_s", "tuning_s", "fitting_s", "in_cells_s")
    out = dict.fromkeys(keys, 0.0)
    for record in records:
        timings = record.get("timings") or {}
        scores = ((record.get("info") or {}).get("tuning") or {}).get("scores") or []
        tuning_compile = sum(s.get("compile") or 0.0 for s in scores)
        compile_s = timings.get("compile") or 0.0
        tuning = timings.get("tuning") or 0.0
        in_fit = timings.get("cell_wall", 0.0) - timings.get("overhead", 0.0)
        out["compile_s"] += compile_s
        out["tuning_compile_s"] += tuning_compile
        out["tuning_s"] += tuning - tuning_compile
        out["fitting_s"] += in_fit - tuning - compile_s
        out["in_cells_s"] += timings.get("overhead", 0.0)
    return out


def log_seconds(log: Path, sweep_s: float) -> dict[str, float]:
    """``install_s`` and ``report_s`` from a log whose lines start with seconds since the
    command started (``--stamp``)."""
    stamps = []
    started = None
    for line in log.read_text().splitlines():
        match = re.match(r"\s*([0-9.]+) (.*)", line)
        if match:
            stamps.append(float(match.group(1)))
            if started is None and "nox > ppl-bnn bench" in match.group(2):
                started = float(match.group(1))
    if started is None or not stamps:
        return {}
    return {"install_s": started, "report_s": stamps[-1] - started - sweep_s}


def breakdown(results_dir: Path, log: Path | None = None, jobs: int = 2) -> dict[str, float]:
    """The decomposition of the module docstring, in seconds."""
    run = json.loads((results_dir / "suite.json").read_text())["runs"][-1]
    records = [json.loads(p.read_text()) for p in results_dir.glob("cells/*/record.json")]
    out: dict[str, float] = {"cells": len(records), "sweep_s": run["wall_s"]}
    if log is not None:
        out.update(log_seconds(log, run["wall_s"]))
    cells = cell_seconds(records)
    out.update(cells)
    out["reference_s"] = 0.0
    if run.get("references_computed"):
        for path in results_dir.glob("references/*/reference.json"):
            out["reference_s"] += json.loads(path.read_text()).get("wall_s") or 0.0
    out["runner_s"] = jobs * run["wall_s"] - sum(cells.values()) - out["reference_s"]
    return out


def _stamp() -> None:
    """Copy stdin to stdout, each line prefixed with the seconds since this started."""
    start = time.monotonic()
    for line in sys.stdin:
        sys.stdout.write(f"{time.monotonic() - start:9.1f} {line}")
        sys.stdout.flush()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", nargs="?", type=Path)
    parser.add_argument("--log", type=Path, help="the command's log, written through --stamp")
    parser.add_argument("--jobs", type=int, default=2, help="cells at once (default 2)")
    parser.add_argument("--stamp", action="store_true", help="time-stamp stdin's lines")
    args = parser.parse_args()
    if args.stamp:
        _stamp()
    else:
        for key, value in breakdown(args.results_dir, args.log, args.jobs).items():
            print(f"{key:>16} {value:10.1f}" if isinstance(value, float) else f"{key:>16} {value}")
