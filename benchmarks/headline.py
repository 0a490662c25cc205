"""The README's headline results, generated from the records committed in ``benchmarks/results/``.

``benchmarks/results/<suite>/`` holds what a run of a suite leaves behind that its published
figures need, no netCDF: ``results.csv`` (one row per cell), ``summary.json`` (the Summary's
verdict per dataset), the suite file as it ran and ``run.json`` (versions, machine, commit,
date, wall time, and the programs the cells compiled and loaded from JAX's compilation cache,
on which the wall time depends). ``--store`` copies them from a results folder; ``--write`` puts
the table into the README between its ``<!-- headline:<suite> -->`` and ``<!-- /headline -->``
lines, and ``tests/test_headline.py`` fails when the two differ::

    nox -s bench
    python benchmarks/headline.py --store reports/default --command "nox -s bench"
    python benchmarks/headline.py --write README.md
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import shutil
import statistics
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd

from ppl_bnn.reference import PREDICTIONS_FILE
from ppl_bnn.report.equivalence import Margins
from ppl_bnn.report.fidelity import FLOOR_DISTANCES
from ppl_bnn.report.fmt import mean_se
from ppl_bnn.report.load import ReferenceEntry
from ppl_bnn.report.recommend import recommend, with_cost

RESULTS = Path(__file__).resolve().parent / "results"
SUITES = Path(__file__).resolve().parent
#: The files of a results folder that are kept (``run.json`` is written from ``suite.json``).
KEPT = ("results.csv", "summary.json")


def _markers(suite: str) -> tuple[str, str]:
    return f"<!-- headline:{suite} -->", "<!-- /headline -->"


def _names(standings: list[dict[str, Any]], grade: str) -> list[dict[str, Any]]:
    return [s for s in standings if s["grade"] == grade]


def _wall(run: dict[str, Any]) -> str:
    """The wall time of the runs that produced the records: their sum, and how many there were
    where a later run added cells to an earlier one's (from the last run that ran every cell:
    the earlier ones' cells were all run again)."""
    runs = [r for r in run.get("runs") or [] if r.get("wall_s") is not None]
    whole = [i for i, r in enumerate(runs) if r.get("cells_run", 0) >= run["cells"]]
    runs = runs[whole[-1] :] if whole else runs
    minutes = sum(r["wall_s"] for r in runs) / 60 if runs else run["wall_s"] / 60
    return f"{minutes:.1f} minutes" + (f" in {len(runs)} runs" if len(runs) > 1 else "")


def compilation(results_dir: Path) -> dict[str, int]:
    """The programs XLA compiled and those loaded from JAX's persistent compilation cache,
    summed over a results folder's cell records (their ``compilation``): how warm the cache was
    when the run started, which its wall time depends on."""
    totals = {"xla_compiles": 0, "jax_cache_hits": 0}
    for path in results_dir.glob("cells/*/record.json"):
        found = json.loads(path.read_text()).get("compilation") or {}
        for key in totals:
            totals[key] += int(found.get(key) or 0)
    return totals


def _cache(run: dict[str, Any]) -> str:
    """``", M of N programs loaded from JAX's compilation cache"``, or nothing where the run's
    records do not say (stored before they were counted)."""
    found = run.get("compilation")
    if not found:
        return ""
    loaded = found["jax_cache_hits"]
    return f", {loaded} of {loaded + found['xla_compiles']} programs loaded from JAX's cache"


def headline(suite: str) -> str:
    """The Markdown table of ``benchmarks/results/<suite>/summary.json`` and its run: per
    dataset what to trust (with its convergence flag), the cheapest contestant shown as good as
    it, how many are undecided, and what to avoid."""
    folder = RESULTS / suite
    summary = json.loads((folder / "summary.json").read_text())
    run = json.loads((folder / "run.json").read_text())
    lines = [
        "| dataset | ranked on | trust | as good, cheapest | undecided | avoid |",
        "|---|---|---|---|---|---|",
    ]
    for entry in summary["datasets"]:
        standings = entry["standings"]
        trusted = _names(standings, "trust")
        if trusted:
            top = trusted[0]
            trust = f"{top['method']}/{top['backend']} ({mean_se(top['value'], top['se'])})"
            if top.get("flag"):
                trust += f"; {top['flag']}"
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
        undecided = len(_names(standings, "undecided")) or ""
        basis = {"ref_w2": "W2 to the reference", "ref_tv": "TV to the reference"}.get(
            entry["basis"], "test log-likelihood"
        )
        lines.append(f"| {entry['dataset']} | {basis} | {trust} | {tie} | {undecided} | {avoid} |")
    versions = run["environment"]["versions"]
    lines += [
        "",
        f"The `{suite}` suite at {run['environment']['git_commit'][:7]} "
        f"({run['environment']['date'][:10]}; {run['cells']} cells in "
        f"{_wall(run)} on {run['environment']['machine']['cores']} cores{_cache(run)}; "
        f"numpyro {versions['numpyro']}, pyro-ppl {versions['pyro-ppl']}), from "
        f"`benchmarks/results/{suite}/`. In words:",
        "",
        *(f"- **{entry['dataset']}.** {entry['sentence']}" for entry in summary["datasets"]),
    ]
    return "\n".join(lines)


def standings(suite: str) -> str:
    """Per dataset of the Summary: its sentence and every contestant's grade, score (mean ±
    standard error over the seeds or splits), cost and the reason for an ``avoid``."""
    summary = json.loads((RESULTS / suite / "summary.json").read_text())
    blocks = []
    for entry in summary["datasets"]:
        rows = []
        for s in entry["standings"]:
            cost = "" if s["cost_s"] is None else f"{s['cost_s']:.3g}"
            score = mean_se(s["value"], s["se"])
            rows.append(
                f"| {s['method']} | {s['backend']} | {s['grade']} | {score} | {cost} "
                f"| {s['reason']} |"
            )
        blocks += [
            f"### {entry['dataset']}",
            "",
            entry["sentence"],
            "",
            "| method | backend | grade | score | cost (s) | why |",
            "|---|---|---|---:|---:|---|",
            *rows,
            "",
        ]
    return "\n".join(blocks).rstrip()


#: The columns of :func:`metrics`: (header, results.csv column, digits).
METRICS = (
    ("test LL", "test_ll", 3),
    ("RMSE", "rmse", 3),
    ("accuracy", "accuracy", 3),
    ("NLL", "nll", 3),
    ("90% coverage", "coverage_90", 2),
    ("ECE", "ece", 3),
    ("OOD AUROC", "ood_auroc", 2),
    ("refused: test", "refused_test", 2),
    ("refused: OOD", "refused_ood", 2),
    ("refused: noise", "refused_noise", 2),
    ("fit, total (s)", "time_total", 3),
)


def _over_cells(rows: list[dict[str, str]], column: str, digits: int) -> str:
    """Mean ± standard error of ``column`` over the cells that have it (the report's format)."""
    values = [float(r[column]) for r in rows if r.get(column)]
    if not values:
        return ""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    return mean_se(statistics.fmean(values), se, digits)


def _cells(suite: str) -> list[dict[str, str]]:
    """The rows of the suite's ``results.csv``."""
    with open(RESULTS / suite / "results.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _contests(suite: str) -> dict[str, dict[tuple[str, str], list[dict[str, str]]]]:
    """The contestants' rows of ``results.csv`` (the studies' cells left out), by dataset and
    then by ``(method, backend)``, in the order of the file."""
    out: dict[str, dict[tuple[str, str], list[dict[str, str]]]] = {}
    for row in _cells(suite):
        if not row.get("sweep"):
            contest = out.setdefault(row["dataset"], {})
            contest.setdefault((row["method"], row["backend"]), []).append(row)
    return out


def metrics(suite: str) -> str:
    """Per dataset, every contestant's held-out metrics from ``results.csv``: mean ± standard
    error over its cells (seeds, or splits), the sweeps' cells left out, a column only where
    the dataset has it."""
    blocks = []
    for dataset, contestants in _contests(suite).items():
        rows = [row for group in contestants.values() for row in group]
        columns = [m for m in METRICS if any(row.get(m[1]) for row in rows)]
        lines = [
            f"### {dataset}",
            "",
            "| method | backend | cells | " + " | ".join(c[0] for c in columns) + " |",
            "|---|---|---:|" + "---:|" * len(columns),
        ]
        for (method, backend), mine in contestants.items():
            numbers = [_over_cells(mine, col, digits) for _, col, digits in columns]
            lines.append(f"| {method} | {backend} | {len(mine)} | " + " | ".join(numbers) + " |")
        blocks += [*lines, ""]
    return "\n".join(blocks).rstrip()


def reference_settings(reference: dict[str, Any]) -> str:
    """How the run's references were sampled, from its ``run.json``'s ``reference``
    (:class:`ppl_bnn.reference.ReferenceSettings`): a chain ensemble of the engine's chains in
    batches, until its floor, its most chains or its time budget."""
    steps = f"{reference['num_warmup']} warm-up steps + {reference['num_samples']} draws"
    extras = [
        text
        for key, text in (
            ("thinning", "a draw kept every {} steps"),
            ("max_tree_depth", "tree depth <= {}"),
            ("target_accept", "target acceptance {}"),
        )
        if reference.get(key) is not None
        for text in [text.format(reference[key])]
    ]
    chain = f"{steps}{' (' + ', '.join(extras) + ')' if extras else ''}"
    batch = reference.get("chains_per_batch") or reference["num_chains"]
    return (
        f"{reference['engine'].upper()} chain ensemble from deep-ensemble starts: batches of "
        f"{batch} chains of {chain}, until its floor is {reference['target_floor']:g}, "
        f"{reference['num_chains']} chains have run or {reference['max_seconds']:g} s are spent"
    )


def run_table(suite: str) -> str:
    """The run behind the records: commit, date, cells, wall time, machine and versions."""
    run = json.loads((RESULTS / suite / "run.json").read_text())
    env = run["environment"]
    splits: dict[str, set[int]] = {}
    for row in _cells(suite):
        splits.setdefault(row["dataset"], set()).add(int(row["split"]))
    rows = [
        ("command", f"`{run['command']}`" if run.get("command") else "not recorded"),
        (
            "data sets (splits)",
            "; ".join(f"{d} ({', '.join(map(str, sorted(s)))})" for d, s in splits.items()),
        ),
        ("commit", env["git_commit"][:7]),
        ("finished", env["date"][:16].replace("T", " ") + " UTC"),
        ("cells", str(run["cells"])),
        ("wall time", _wall(run) + _cache(run)),
        ("machine", f"{env['machine']['cores']} cores, {env['machine']['processor']}"),
        *((name, version) for name, version in env["versions"].items()),
    ]
    reference = run.get("reference")
    if reference:
        rows.append(("reference posterior", reference_settings(reference)))
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def _published_block(
    dataset: str, contestants: dict[tuple[str, str], list[dict[str, str]]]
) -> list[str]:
    """One dataset's rows of :func:`published`: ours, then the published figures."""
    from ppl_bnn.report.published_figures import (
        published_classification_for,
        published_regression_for,
    )

    regression, classification = (
        published_regression_for(dataset),
        published_classification_for(dataset),
    )
    if not (regression or classification):
        return []
    columns = ("test_ll", "rmse") if regression else ("accuracy", "nll")
    names = ("test LL", "RMSE") if regression else ("accuracy", "NLL")
    lines = [
        f"### {dataset}",
        "",
        f"| method | source | splits | {names[0]} | {names[1]} |",
        "|---|---|---:|---:|---:|",
    ]
    for (method, backend), mine in contestants.items():
        first, second = (_over_cells(mine, c, 4) for c in columns)
        splits = len({r["split"] for r in mine})
        lines.append(f"| {method}/{backend} | these records | {splits} | {first} | {second} |")
    for ref in regression:
        ll, rmse = mean_se(ref.test_ll, ref.test_ll_se), mean_se(ref.rmse, ref.rmse_se)
        lines.append(f"| {ref.method} | {ref.source.label} | all | {ll} | {rmse} |")
    for ref in classification:
        nll = "" if ref.nll is None else f"{ref.nll:g}"
        lines.append(f"| {ref.model} | {ref.source.label} | | {ref.accuracy:g} | {nll} |")
    return [*lines, ""]


def published(suite: str) -> str:
    """Per data set of the records that has published figures: each contestant's test
    log-likelihood and RMSE (regression) or accuracy and NLL (classification), mean ± standard
    error over its splits and seeds, beside the published figures, labelled with their sources
    (:mod:`ppl_bnn.report.published_figures`, typed in from the papers)."""
    blocks: list[str] = []
    for dataset, contestants in _contests(suite).items():
        blocks += _published_block(dataset, contestants)
    return "\n".join(blocks).rstrip()


#: The tables a page can ask for (``docs/_ext/records.py``).
TABLES = {
    "headline": headline,
    "standings": standings,
    "metrics": metrics,
    "published": published,
    "run": run_table,
}


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


def store(results_dir: Path, command: str) -> Path:
    """Copy a finished run's records into ``benchmarks/results/<suite>/``, with the command
    that produced them."""
    suite_json = json.loads((results_dir / "suite.json").read_text())
    name = suite_json["name"]
    folder = RESULTS / name
    folder.mkdir(parents=True, exist_ok=True)
    for file in KEPT:
        shutil.copyfile(results_dir / file, folder / file)
    shutil.copyfile(SUITES / f"{name}.toml", folder / "suite.toml")
    runs = suite_json.get("runs") or [{}]
    run = {
        "command": command,
        "environment": suite_json["environment"],
        "reference": suite_json.get("reference"),
        "cells": len(suite_json["cells"]),
        "wall_s": runs[-1].get("wall_s"),
        "runs": runs,
        "compilation": compilation(results_dir),
    }
    (folder / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    return folder


def _standing_in(basis: str, folder: Path) -> list[ReferenceEntry]:
    """A reference with a floor where the Summary ranked on fidelity, none otherwise: what the
    rule reads of a run's references."""
    if basis not in FLOOR_DISTANCES:
        return []
    (folder / PREDICTIONS_FILE).write_bytes(b"")
    return [ReferenceEntry("any", 0, "ok", True, None, {}, {}, {}, 1.0, folder)]


def verdicts(suite: str) -> list[dict[str, Any]]:
    """The Summary's verdict per dataset of ``benchmarks/results/<suite>/``, recomputed from its
    ``results.csv`` by the rule as it is (:func:`ppl_bnn.report.recommend.recommend`, the suite
    file's margins), each dataset's references stood in for by its stored basis: what
    ``nox -s report`` writes, for records whose results folder is not at hand. The sentence keeps
    its stored words on the basis, which name the references."""
    folder = RESULTS / suite
    cells = pd.read_csv(folder / "results.csv")
    if "sweep" in cells:
        cells = cells[cells["sweep"].isna()]
    margins = Margins.of(tomllib.loads((folder / "suite.toml").read_text()).get("margins"))
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for entry in json.loads((folder / "summary.json").read_text())["datasets"]:
            mine = with_cost(cells[cells["dataset"] == entry["dataset"]])
            references = _standing_in(entry["basis"], Path(scratch))
            found = recommend(entry["dataset"], mine, references, margins).to_dict()
            head = found["sentence"].split(" Ranked on ")[0]
            why = entry["sentence"].partition(" Ranked on ")[2]
            sentence = f"{head} Ranked on {why}" if why else head
            out.append({**found, "basis": entry["basis"], "basis_why": entry["basis_why"],
                        "sentence": sentence})  # fmt: skip
    return out


def reverdict(suite: str) -> None:
    """Rewrite ``summary.json``'s verdicts with :func:`verdicts`."""
    path = RESULTS / suite / "summary.json"
    summary = json.loads(path.read_text())
    summary["datasets"] = verdicts(suite)
    path.write_text(json.dumps(summary, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="default")
    parser.add_argument("--store", type=Path, help="a finished run's results folder to keep")
    parser.add_argument(
        "--command", help="with --store: the command that ran the suite, as a reader would type it"
    )
    parser.add_argument("--write", type=Path, help="the README to put the table into")
    parser.add_argument("--verdict", action="store_true",
                        help="recompute the suite's stored verdicts from its stored cells by the "
                             "rule as it is")  # fmt: skip
    args = parser.parse_args(argv)
    if args.verdict:
        reverdict(args.suite)
        print(f"verdicts of {args.suite} recomputed")
    if args.store:
        if not args.command:
            parser.error("--store needs --command: the command that ran the suite")
        print(f"records kept in {store(args.store, args.command)}")
    if args.write:
        print("README updated" if write(args.write, args.suite) else "README already current")
    if not (args.store or args.write or args.verdict):
        print(headline(args.suite))
    return 0


if __name__ == "__main__":
    sys.exit(main())
