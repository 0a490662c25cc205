"""Where a comparison's time went, from its results folder: fitting, the reference, and what
``compare`` adds around them.

For a run of one cell at a time (``--jobs 1``), whose last sweep computed what it holds::

    python benchmarks/compare_overhead.py RESULTS_DIR

- ``sweep_s``: the sweep's wall time (``suite.json``'s last run);
- ``reference_s``: the reference posterior's computation (when this sweep computed it);
- ``fitting_s``: the time the cells spent inside ``fit`` (tuning fits included, a shared MAP
  fit counted once, where it ran);
- ``fit_calls_s``: what the cells' ``fit`` calls report (``timings.total`` plus tuning), a
  shared MAP fit counted in every cell that reads it: the sum a loop over ``fit`` would pay;
- ``in_cells_s``: the cells' time outside ``fit`` (loading data, evaluating, writing files);
- ``runner_s``: the rest of the sweep (starting warm workers, planning, scheduling);
- ``overhead_share``: ``(in_cells_s + runner_s) / (fitting_s + reference_s)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def overhead(results_dir: str | Path) -> dict[str, float]:
    """The decomposition above, in seconds (and the share)."""
    root = Path(results_dir)
    run = json.loads((root / "suite.json").read_text())["runs"][-1]
    records = [json.loads(p.read_text()) for p in root.glob("cells/*/record.json")]
    timings = [r["timings"] for r in records]
    cells_s = sum(t["cell_wall"] for t in timings)
    in_cells_s = sum(t["overhead"] for t in timings)
    reference_s = 0.0
    if run["references_computed"]:
        for path in root.glob("references/*/reference.json"):
            reference_s += json.loads(path.read_text()).get("wall_s") or 0.0
    fitting_s = cells_s - in_cells_s
    runner_s = run["wall_s"] - cells_s - reference_s
    return {
        "cells": len(records),
        "sweep_s": run["wall_s"],
        "reference_s": reference_s,
        "fitting_s": fitting_s,
        "fit_calls_s": sum(t.get("total", 0.0) + t.get("tuning", 0.0) for t in timings),
        "in_cells_s": in_cells_s,
        "runner_s": runner_s,
        "overhead_share": (in_cells_s + runner_s) / (fitting_s + reference_s),
    }


if __name__ == "__main__":
    for key, value in overhead(sys.argv[1]).items():
        print(f"{key:>15} {value:.3f}" if isinstance(value, float) else f"{key:>15} {value}")
