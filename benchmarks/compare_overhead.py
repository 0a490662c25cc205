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

To measure the README's example from empty caches, ``RUNS`` times one after the other (each in a
new results folder with a new cache directory, so that the reference and every program are
computed again), and keep the runs and their mean share with its standard error::

    python benchmarks/compare_overhead.py --runs 3 --json benchmarks/results/compare_overhead.json

Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: The committed measurement (``--runs 3 --json`` this file), which the docs render.
RECORD = Path(__file__).resolve().parent / "results" / "compare_overhead.json"
#: The README's example: the diabetes data as a file, four methods, one cell at a time.
README_COMMAND = [
    "ppl-bnn", "compare", "diabetes.csv", "--target", "target", "--hidden", "20",
    "--methods", "map,laplace,svi,nuts", "--jobs", "1",
]  # fmt: skip


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


def readme_run(folder: Path) -> dict[str, float]:
    """The README's example run once in ``folder`` from empty caches; its decomposition."""
    from sklearn.datasets import load_diabetes

    folder.mkdir(parents=True)
    load_diabetes(as_frame=True).frame.to_csv(folder / "diabetes.csv", index=False)
    out = folder / "out"
    environment = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
    # The command of this interpreter's environment, as the README runs it.
    program = str(Path(sys.executable).with_name(README_COMMAND[0]))
    command = [program, *README_COMMAND[1:], "--out", str(out)]
    subprocess.run(command, cwd=folder, env=environment, check=True, capture_output=True)
    return overhead(out)


def mean_and_standard_error(values: list[float]) -> tuple[float, float]:
    """The mean of ``values`` and its standard error (NaN from one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """The runs' shares, their mean and its standard error, and each seconds' mean."""
    shares = [run["overhead_share"] for run in runs]
    mean, se = mean_and_standard_error(shares)
    seconds = {
        key: mean_and_standard_error([run[key] for run in runs])[0]
        for key in runs[0]
        if key.endswith("_s")
    }
    return {"shares": shares, "share_mean": mean, "share_se": se, "mean_seconds": seconds}


def markdown(found: dict[str, Any]) -> str:
    """The measurement as Markdown: a sentence and one row per run, in seconds (the docs render
    it, ``docs/_ext/records.py``)."""
    lines = [
        f"What `compare` added around its fits and its reference (loading data, evaluating, "
        f"writing files, starting its worker, scheduling): {found['share_mean']:.1%} ± "
        f"{found['share_se']:.1%} of their time over {len(found['runs'])} runs of "
        f"`{found['readme_command']}` from empty caches on {found['cores']} cores (at "
        f"{found['commit']}, {found['date']}).",
        "",
        "| run | sweep s | reference s | fitting s | in cells s | runner s | overhead |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, run in enumerate(found["runs"], start=1):
        seconds = " | ".join(
            f"{run[key]:.1f}"
            for key in ("sweep_s", "reference_s", "fitting_s", "in_cells_s", "runner_s")
        )
        lines.append(f"| {i} | {seconds} | {run['overhead_share']:.1%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results_dir", nargs="?", type=Path, help="decompose this results folder")
    parser.add_argument("--runs", type=int, help="run the README's example this many times")
    parser.add_argument("--json", type=Path, help="with --runs: also write the runs here")
    args = parser.parse_args()
    if (args.results_dir is None) == (args.runs is None):
        parser.error("give a results folder, or --runs")
    if args.results_dir is not None:
        for key, value in overhead(args.results_dir).items():
            print(f"{key:>15} {value:.3f}" if isinstance(value, float) else f"{key:>15} {value}")
        return
    with tempfile.TemporaryDirectory() as scratch:
        runs = [readme_run(Path(scratch) / f"run{i}") for i in range(args.runs)]
    result = summary(runs)
    print(f"overhead share: {result['share_mean']:.3f} +- {result['share_se']:.3f} "
          f"over {args.runs} runs ({', '.join(f'{s:.3f}' for s in result['shares'])})")  # fmt: skip
    if args.json is not None:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parents[1],
            capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        record = {
            "command": " ".join(["python benchmarks/compare_overhead.py", *sys.argv[1:]]),
            "readme_command": " ".join(README_COMMAND),
            "commit": commit,
            "date": time.strftime("%Y-%m-%d"),
            "cores": os.cpu_count(),
            **result,
            "runs": runs,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
