"""What ``seeds = "auto"`` costs and what it decides, read from one finished run of a suite with
it (docs/guide/suites.md gives the run):

    python benchmarks/auto_seeds.py reports/auto/default
    python benchmarks/auto_seeds.py reports/auto/default \\
        --store benchmarks/results/auto_seeds.json --command "..."

Round 0 is seeds 0-2; round r adds seed 2 + r to the contestants still undecided and to the
trusted one. Per round: its cells, its wall minutes (first start to last finish of its cells)
and its cells' summed minutes. Then each dataset's verdicts at n = 3 (recomputed from the
seeds 0-2 cells alone by the rule as it is, :func:`ppl_bnn.report.recommend.recommend`) and
after the last round (the run's own Summary): how many contestants are trusted, as good,
undecided and worse.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from headline import _standing_in  # the stand-in for a run's references

from ppl_bnn.report.equivalence import Margins
from ppl_bnn.report.recommend import recommend, with_cost

#: The committed measurement (docs/guide/suites.md renders it).
RECORD = Path(__file__).resolve().parent / "results" / "auto_seeds.json"
#: The fixed seeds every contestant gets first.
FIRST_SEEDS = 3


def _cells(folder: Path) -> pd.DataFrame:
    cells = pd.read_csv(folder / "results.csv")
    if "sweep" in cells:
        cells = cells[cells["sweep"].isna()]
    for column in ("started_at", "finished_at"):
        cells[column] = pd.to_datetime(cells[column])
    return cells


#: Seconds between the last finish of a round's cells and the first start of the next: the
#: verdict that plans it. Within a round a cell starts as soon as a worker is free.
ROUND_GAP_S = 3.0


def rounds(cells: pd.DataFrame) -> list[dict[str, Any]]:
    """Per round: the seeds it ran, its cells, its wall and summed cell minutes. Round 0 is
    the first seeds' cells; the later rounds are told apart by time, as each starts only after
    the one before has finished (:data:`ROUND_GAP_S`)."""
    first = cells[cells["seed"] < FIRST_SEEDS]
    groups, current, last_finish = [first], [], None
    for _, cell in cells[cells["seed"] >= FIRST_SEEDS].sort_values("started_at").iterrows():
        if current and (cell["started_at"] - last_finish).total_seconds() > ROUND_GAP_S:
            groups.append(pd.DataFrame(current))
            current = []
        finish = cell["finished_at"]
        last_finish = max(last_finish, finish) if current else finish
        current.append(cell)
    if current:
        groups.append(pd.DataFrame(current))
    out = []
    for number, group in enumerate(groups):
        span = (group["finished_at"].max() - group["started_at"].min()).total_seconds()
        out.append({
            "round": number,
            "seeds": sorted(int(s) for s in group["seed"].unique()),
            "cells": len(group),
            "wall_min": round(span / 60, 1),
            "cell_min": round(group["time_cell_wall"].sum() / 60, 1),
        })  # fmt: skip
    return out


def grades(folder: Path, cells: pd.DataFrame, margins: Margins) -> dict[str, dict[str, dict]]:
    """Per dataset, the count of each grade at n = 3 and after the last round."""
    summary = json.loads((folder / "summary.json").read_text())
    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for entry in summary["datasets"]:
            first = cells[(cells["dataset"] == entry["dataset"]) & (cells["seed"] < FIRST_SEEDS)]
            references = _standing_in(entry["basis"], Path(scratch))
            at_three = recommend(entry["dataset"], with_cost(first), references, margins)
            out[entry["dataset"]] = {
                "n3": dict(Counter(s["grade"] for s in at_three.to_dict()["standings"])),
                "final": dict(Counter(s["grade"] for s in entry["standings"])),
                "max_n": max((s.get("n") or 0) for s in entry["standings"]),
            }
    return out


def measure(folder: Path) -> dict[str, Any]:
    """:func:`rounds` and :func:`grades` of the run in ``folder``, with its total wall time."""
    cells = _cells(folder)
    suite = json.loads((folder / "suite.json").read_text())
    margins = Margins.of(suite.get("margins"))
    walls = [r["wall_s"] for r in suite.get("runs", [])]
    return {
        "rounds": rounds(cells),
        "grades": grades(folder, cells, margins),
        "run_wall_min": round(sum(walls) / 60, 1),
        "git_commit": (suite.get("environment") or {}).get("git_commit"),
    }


def markdown(found: dict[str, Any]) -> str:
    """The measurement as Markdown: a sentence, the rounds, the verdicts (the docs render it,
    ``docs/_ext/records.py``)."""
    first, later = found["rounds"][0], found["rounds"][1:]
    added = sum(r["cells"] for r in later)
    added_min = sum(r["wall_min"] for r in later)
    counts = {
        k: sum(g[k].get("undecided", 0) for g in found["grades"].values()) for k in ("n3", "final")
    }
    ranked = sum(sum(g["final"].values()) for g in found["grades"].values())
    lines = [
        f"Seeds 0-2 ran {first['cells']} cells in {first['wall_min']} minutes of wall time; "
        f"{len(later)} more rounds added {added} cells ({added / first['cells']:.0%}) in "
        f"{added_min:.1f} minutes ({added_min / first['wall_min']:.0%} more). Undecided "
        f"contestants: {counts['n3']} of {ranked} at three seeds, {counts['final']} after the "
        f"last round. The whole run, references included: {found['run_wall_min']} minutes "
        f"(at {str(found.get('git_commit'))[:7]}).",
        "",
        "| round | seeds | cells | wall min | cell min |",
        "|---|---|---|---|---|",
    ]
    for r in found["rounds"]:
        seeds = ", ".join(map(str, r["seeds"]))
        lines.append(
            f"| {r['round']} | {seeds} | {r['cells']} | {r['wall_min']} | {r['cell_min']} |"
        )
    lines += [
        "",
        "| dataset | at three seeds | after the last round | most seeds |",
        "|---|---|---|---|",
    ]
    for dataset, g in found["grades"].items():
        at = ", ".join(f"{k} {v}" for k, v in sorted(g["n3"].items()))
        end = ", ".join(f"{k} {v}" for k, v in sorted(g["final"].items()))
        lines.append(f"| {dataset} | {at} | {end} | {g['max_n']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the results folder of a seeds='auto' run")
    parser.add_argument("--store", type=Path, help="write the measurement here (JSON)")
    parser.add_argument("--command", default="", help="the command that made the run")
    args = parser.parse_args(argv)
    found = measure(args.results)
    print(markdown(found))
    if args.store:
        found["command"] = args.command
        args.store.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
