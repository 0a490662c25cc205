"""Two runs of a suite side by side, from their reports' ``summary.json``: first whether their
decisions agree (the trusted contestant of each dataset in each run; every contestant "as good" in
one run and "worse" in the other), then each dataset's verdict sentence, then every contestant's
grade and score (mean ± s.e. over splits and seeds, on the dataset's ranking basis: fidelity to the
reference, or held-out test log-likelihood) before and after, a change marked where the two differ
by more than twice their combined standard error, and each tuned contestant beside its default in
the later run (a tie: within that noise).

    python benchmarks/compare_summaries.py BEFORE/summary.json AFTER/summary.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

TUNED = " (tuned)"


def _standings(path: Path) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """dataset -> (method, backend) -> standing, and each dataset's sentence under ``""``."""
    out: dict[str, dict[Any, Any]] = {}
    for entry in json.loads(path.read_text())["datasets"]:
        rows = {(s["method"], s["backend"]): s for s in entry["standings"]}
        out[entry["dataset"]] = {"": entry["sentence"], "basis": entry["basis"], **rows}
    return out


def _score(standing: dict[str, Any] | None) -> str:
    if standing is None:
        return "·"
    value, se = standing.get("value"), standing.get("se")
    if value is None or not math.isfinite(value):
        return standing["grade"]
    return f"{standing['grade']}: {value:.4g} ± {se:.2g}"


def _apart(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two standings' scores differ by more than twice their combined s.e."""
    if a is None or b is None or a.get("value") is None or b.get("value") is None:
        return False
    noise = math.hypot(a.get("se") or 0.0, b.get("se") or 0.0)
    return abs(a["value"] - b["value"]) > 2 * noise


def _graded(rows: dict[Any, Any], grade: str) -> set[tuple[str, str]]:
    return {key for key, s in rows.items() if isinstance(key, tuple) and s["grade"] == grade}


def agreement(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Markdown lines: the datasets whose trusted contestant is the same in both runs, and the
    contestants "as good" in one run and "worse" in the other (a contradiction: each run
    claims to have shown the opposite)."""
    shared = [d for d in new if d in old]
    same, lines = 0, ["## Agreement", ""]
    for dataset in shared:
        a, b = old[dataset], new[dataset]
        trusted = sorted(_graded(a, "trust")), sorted(_graded(b, "trust"))
        same += trusted[0] == trusted[1]
        flips = (_graded(a, "as good") & _graded(b, "worse")) | (
            _graded(a, "worse") & _graded(b, "as good")
        )
        names = ", ".join(f"{m}/{k}" for m, k in sorted(flips)) or "none"
        lines.append(
            f"- {dataset}: trusted {'/'.join(trusted[0][0]) if trusted[0] else '·'} before, "
            f"{'/'.join(trusted[1][0]) if trusted[1] else '·'} after; "
            f"as good in one run and worse in the other: {names}"
        )
    lines += ["", f"The trusted contestant is the same on {same} of {len(shared)} datasets.", ""]
    return lines


def compare(before: Path, after: Path) -> str:
    """The Markdown comparison of two ``summary.json`` files."""
    old, new = _standings(before), _standings(after)
    lines = agreement(old, new)
    for dataset in [*new, *(d for d in old if d not in new)]:
        a, b = old.get(dataset, {}), new.get(dataset, {})
        lines += [f"## {dataset} ({b.get('basis', a.get('basis'))})", "",
                  f"- before: {a.get('', '·')}", f"- after: {b.get('', '·')}", "",
                  "| contestant | before | after | changed |", "|---|---|---|---|"]  # fmt: skip
        keys = [k for k in b if isinstance(k, tuple)] + [k for k in a if isinstance(k, tuple)]
        for key in dict.fromkeys(keys):
            changed = "yes" if _apart(a.get(key), b.get(key)) else ""
            lines.append(f"| {key[0]}/{key[1]} | {_score(a.get(key))} | {_score(b.get(key))} | "
                         f"{changed} |")  # fmt: skip
        ties = []
        for (method, backend), tuned in ((k, v) for k, v in b.items() if isinstance(k, tuple)):
            default = b.get((method.removesuffix(TUNED), backend))
            if method.endswith(TUNED) and default is not None:
                verdict = "differs from" if _apart(default, tuned) else "ties with"
                ties.append(f"{method.removesuffix(TUNED)}/{backend} {verdict} its tuned one")
        lines += ["", *(f"- {t}" for t in ties), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    print(compare(args.before, args.after))


if __name__ == "__main__":
    main()
