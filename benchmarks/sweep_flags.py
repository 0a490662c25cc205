"""Where a suite slice's time goes under several XLA flag settings: the same cells swept once per
setting, each from empty caches (a new results folder, JAX compilation cache and reference
cache), without references or report, and decomposed by :mod:`bench_breakdown`.

    python benchmarks/sweep_flags.py --suite default --datasets diabetes --json OUT.json

The settings (:data:`SETTINGS`): XLA's defaults, which ``ppl-bnn bench`` and users' fits keep;
LLVM at level 1 with XLA's older CPU emitters (``xla_optimisation="low"``); and the tests' flags
(``tests/runtime.py``: level 0, older emitters). Prints one Markdown table, seconds per setting:
the sweep's wall time, and summed over the cells (seconds of one core each) compiling (the
cells' fits and their tuning fits), running the fits (tuning included) and the rest of the
cells (data, evaluation, files).
Run it on an otherwise idle machine: the settings are timed one after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_breakdown import breakdown  # noqa: E402
from ppl_bnn.engine.xla import XLA_OPTIMISATION_FLAGS  # noqa: E402
from tests.runtime import TEST_XLA_FLAGS  # noqa: E402

#: Flag settings by name, each added to the process's ``XLA_FLAGS``.
SETTINGS = {
    "XLA's defaults": (),
    "level 1, older emitters": XLA_OPTIMISATION_FLAGS["low"],
    "the tests' flags": TEST_XLA_FLAGS,
}


def sweep(suite: str, datasets: str, jobs: int, flags: tuple[str, ...]) -> dict[str, float]:
    """Sweep ``datasets`` of ``suite`` from empty caches with ``flags``; its breakdown (see
    :func:`bench_breakdown.breakdown`) and ``command_s``, the command's wall time."""
    with tempfile.TemporaryDirectory(prefix="sweep-flags-") as tmp:
        env = {
            **os.environ,
            "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip(),
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
            "PYTHONPATH": str(ROOT),
        }
        command = [
            sys.executable, "-m", "ppl_bnn.cli", "bench", "--suite", suite,
            "--reports-dir", str(Path(tmp) / "reports"), "--datasets", datasets,
            "--jobs", str(jobs), "--no-reference", "--no-report",
        ]  # fmt: skip
        start = time.monotonic()
        subprocess.run(command, env=env, check=True, capture_output=True)
        command_s = time.monotonic() - start
        results = next((Path(tmp) / "reports").glob("*/suite.json")).parent
        return {**breakdown(results, jobs=jobs), "command_s": command_s}


def table(rows: dict[str, dict[str, float]]) -> str:
    """The Markdown table of the module docstring from each setting's :func:`sweep`."""
    lines = [
        "| flags | cells | sweep s | compile s | running fits s | rest of the cells s |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        compile_s = row["compile_s"] + row["tuning_compile_s"]
        running_s = row["tuning_s"] + row["fitting_s"]
        lines.append(
            f"| {name} | {row['cells']:.0f} | {row['sweep_s']:.0f} | {compile_s:.0f} "
            f"| {running_s:.0f} | {row['in_cells_s']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--datasets", default="diabetes", help="comma-separated")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the rows and the run's settings")
    args = parser.parse_args()
    rows: dict[str, Any] = {}
    for name, flags in SETTINGS.items():
        rows[name] = sweep(args.suite, args.datasets, args.jobs, flags)
    print(table(rows))
    if args.json is not None:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        record = {
            "command": " ".join(["python benchmarks/sweep_flags.py", *sys.argv[1:]]),
            "commit": commit,
            "date": time.strftime("%Y-%m-%d"),
            "cores": os.cpu_count(),
            "settings": {name: list(flags) for name, flags in SETTINGS.items()},
            "rows": rows,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
