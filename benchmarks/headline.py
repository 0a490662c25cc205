"""The README's headline results, generated from the records committed in ``benchmarks/results/``.

``benchmarks/results/<suite>/`` holds what a run of a suite leaves behind that its published
figures need, no netCDF: ``results.csv`` (one row per cell), ``summary.json`` (the Summary's
verdict per dataset), the suite file as it ran and ``run.json`` (versions, machine, commit,
date, wall time). ``--store`` copies them from a results folder; ``--write`` puts the table into
the README between its ``<!-- headline:<suite> -->`` and ``<!-- /headline -->`` lines, and
``tests/test_headline.py`` fails when the two differ::

    nox -s bench && python benchmarks/headline.py --store reports/default
    python benchmarks/headline.py --write README.md
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
SUITES = Path(__file__).resolve().parent
#: The files of a results folder that are kept (``run.json`` is written from ``suite.json``).
KEPT = ("results.csv", "summary.json")


def _markers(suite: str) -> tuple[str, str]:
    return f"<!-- headline:{suite} -->", "<!-- /headline -->"


def _number(value: float | None, se: float | None) -> str:
    """``value ± se`` to the second significant digit of ``se`` (the report's rule)."""
    if value is None:
        return ""
    if se is None or not math.isfinite(se) or se <= 0:
        return f"{value:.3g}"
    digits = max(0, 1 - math.floor(math.log10(se)))
    return f"{value:.{digits}f} ± {se:.{digits}f}"


def _names(standings: list[dict[str, Any]], grade: str) -> list[dict[str, Any]]:
    return [s for s in standings if s["grade"] == grade]


def headline(suite: str) -> str:
    """The Markdown table of ``benchmarks/results/<suite>/summary.json`` and its run: per
    dataset what to trust, the cheapest contestant as good as it, and what to avoid."""
    folder = RESULTS / suite
    summary = json.loads((folder / "summary.json").read_text())
    run = json.loads((folder / "run.json").read_text())
    lines = [
        "| dataset | ranked on | trust | as good, cheapest | avoid |",
        "|---|---|---|---|---|",
    ]
    for entry in summary["datasets"]:
        standings = entry["standings"]
        trusted = _names(standings, "trust")
        if trusted:
            top = trusted[0]
            trust = f"{top['method']}/{top['backend']} ({_number(top['value'], top['se'])})"
        else:
            top, trust = None, "nothing ranked"
        ties = [s for s in _names(standings, "as good") if s["cost_s"] is not None]
        cheaper = [s for s in ties if top and top["cost_s"] and s["cost_s"] < top["cost_s"]]
        cheapest = min(cheaper, key=lambda s: s["cost_s"], default=None)
        tie = (
            f"{cheapest['method']}/{cheapest['backend']} at "
            f"{cheapest['cost_s'] / top['cost_s']:.2g}x the cost"
            if cheapest and top
            else ""
        )
        avoid = ", ".join(f"{s['method']}/{s['backend']}" for s in _names(standings, "avoid"))
        basis = {"ref_w2": "W2 to the reference", "ref_tv": "TV to the reference"}.get(
            entry["basis"], "test log-likelihood"
        )
        lines.append(f"| {entry['dataset']} | {basis} | {trust} | {tie} | {avoid} |")
    versions = run["environment"]["versions"]
    lines += [
        "",
        f"The `{suite}` suite at {run['environment']['git_commit'][:7]} "
        f"({run['environment']['date'][:10]}; {run['cells']} cells in "
        f"{run['wall_s'] / 60:.1f} minutes on {run['environment']['machine']['cores']} cores; "
        f"numpyro {versions['numpyro']}, pyro-ppl {versions['pyro-ppl']}), from "
        f"`benchmarks/results/{suite}/`. In words:",
        "",
        *(f"- **{entry['dataset']}.** {entry['sentence']}" for entry in summary["datasets"]),
    ]
    return "\n".join(lines)


def _pattern(suite: str) -> re.Pattern[str]:
    """The suite's block: its start marker, the lines up to the end marker (maybe none), the end
    marker."""
    start, end = _markers(suite)
    return re.compile(re.escape(start) + r"\n(?:(.*?)\n)?" + re.escape(end), re.S)


def write(readme: Path, suite: str) -> bool:
    """Put :func:`headline` between the README's markers; whether it changed."""
    start, end = _markers(suite)
    text = readme.read_text()
    pattern = _pattern(suite)
    if not pattern.search(text):
        raise SystemExit(f"{readme} has no {start} ... {end} block")
    new = pattern.sub(lambda _: f"{start}\n{headline(suite)}\n{end}", text)
    readme.write_text(new)
    return new != text


def block(readme: Path, suite: str) -> str | None:
    """What the README holds between the suite's markers, or None."""
    found = _pattern(suite).search(readme.read_text())
    return None if found is None else found.group(1) or ""


def store(results_dir: Path) -> Path:
    """Copy a finished run's records into ``benchmarks/results/<suite>/``."""
    suite_json = json.loads((results_dir / "suite.json").read_text())
    name = suite_json["name"]
    folder = RESULTS / name
    folder.mkdir(parents=True, exist_ok=True)
    for file in KEPT:
        shutil.copyfile(results_dir / file, folder / file)
    shutil.copyfile(SUITES / f"{name}.toml", folder / "suite.toml")
    runs = suite_json.get("runs") or [{}]
    run = {
        "environment": suite_json["environment"],
        "reference": suite_json.get("reference"),
        "cells": len(suite_json["cells"]),
        "wall_s": runs[-1].get("wall_s"),
        "runs": runs,
    }
    (folder / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--store", type=Path, help="a finished run's results folder to keep")
    parser.add_argument("--write", type=Path, help="the README to put the table into")
    args = parser.parse_args()
    if args.store:
        print(f"records kept in {store(args.store)}")
    if args.write:
        print("README updated" if write(args.write, args.suite) else "README already current")
    if not (args.store or args.write):
        print(headline(args.suite))
    return 0


if __name__ == "__main__":
    sys.exit(main())
