"""The reference posterior's floor against time and chains, per engine, from committed records.

Samples the chain-ensemble reference (:mod:`ppl_bnn.reference`) of split 0 of each data set,
with a suite's network, and records after every batch of chains how many ran and were kept, the
seconds spent and the floor (W2 between two halves of the chains, standardised units; total
variation for classification). One record per (data set, engine) goes to
``benchmarks/results/reference/<dataset>-<engine>.json``; ``--write`` puts the table of every
record into a page between its ``<!-- reference-floor -->`` and ``<!-- /reference-floor -->``
lines, and the comparison of each other engine with MCLMC on the same data set (:func:`engines`)
between its ``<!-- reference-engines -->`` lines; ``tests/test_reference_floor.py`` fails when
the page and the records differ::

    python benchmarks/reference_floor.py --data-dir ../shared/data --engine mclmc \\
        --datasets bostonHousing,concrete,wine-quality-red,diabetes-csv
    python benchmarks/reference_floor.py --write docs/benchmarks/reference.md

``--from-results <results folder>`` takes instead the split-0 references that a benchmark run
computed (``nox -s bench -- --suite uci ...``), with that run's commit and command.
``diabetes-csv`` is scikit-learn's diabetes table written to a CSV file and read through a
suite's ``path`` (as a user's own file is); the other names are catalogue data sets. Measure on
an idle machine: one data set at a time, nothing else running.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from ppl_bnn import BNN, configure_runtime
from ppl_bnn.bench.cell import merge_model, model_arguments
from ppl_bnn.bench.environment import git_commit, machine_info, timestamp
from ppl_bnn.bench.suite import load_suite, parse_suite
from ppl_bnn.data import load_dataset
from ppl_bnn.metrics.reference import evenly
from ppl_bnn.reference import ReferenceSettings
from ppl_bnn.reference.sample import sample_reference
from ppl_bnn.versions import library_versions

RESULTS = Path(__file__).resolve().parent / "results" / "reference"
MARKERS = ("<!-- reference-floor -->", "<!-- /reference-floor -->")
#: The markers of the engines' comparison (:func:`engines`).
ENGINE_MARKERS = ("<!-- reference-engines -->", "<!-- /reference-engines -->")
#: The engine every other is compared with.
DEFAULT_ENGINE = "mclmc"
#: The file-backed data set: scikit-learn's diabetes table as a CSV file.
CSV_NAME = "diabetes-csv"
#: The most batches a row of the table shows (evenly spaced, the first and the last among them).
SHOWN_STEPS = 8
#: A reference cell's metrics that describe its chains (with every ``floor_*``).
FLOOR_METRICS = ("chains_run", "chains_kept", "rhat_across", "rhat_within_median",
                 "ess_within_median")  # fmt: skip


def _csv_dataset(folder: Path) -> dict[str, Any]:
    """The suite ``[[datasets]]`` table of :data:`CSV_NAME`, its file written into ``folder``."""
    from sklearn.datasets import load_diabetes

    path = folder / "diabetes.csv"
    load_diabetes(as_frame=True).frame.to_csv(path, index=False)
    return {"name": CSV_NAME, "path": str(path), "target": "target", "test_fraction": 0.1}


def _data(name: str, suite: str, data_dir: str, folder: Path) -> tuple[Any, dict[str, Any]]:
    """Split 0 of ``name`` and the BNN keywords of ``suite``'s network for it (the dataset's own
    where the suite gives it one)."""
    loaded = load_suite(suite)
    entry = next((e for e in loaded.datasets if e.name == name and e.variant is None), None)
    model = loaded.model if entry is None else merge_model(loaded.model, entry.model)
    if name != CSV_NAME:
        data = load_dataset(name, split=0, data_dir=data_dir)
        return data, model_arguments(model, data)
    table = {"name": "floor", "model": model, "datasets": [_csv_dataset(folder)],
             "methods": {"map": {}}, "backends": ["numpyro"]}  # fmt: skip
    (cell,) = parse_suite(table, where="reference_floor").cells()
    data = load_dataset(cell.dataset, split=0, data_dir=data_dir, **cell.data)
    return data, model_arguments(model, data)


def measure(name: str, engine: str, args: argparse.Namespace) -> dict[str, Any]:
    """Sample ``name``'s reference with ``engine`` and return its record."""
    with tempfile.TemporaryDirectory() as folder:
        data, keywords = _data(name, args.suite, args.data_dir, Path(folder))
    model = BNN(data.x_train, data.y_train, **keywords)
    chosen = ("num_warmup", "num_samples", "thinning", "chains_per_batch")
    per_chain = {k: getattr(args, k) for k in chosen}
    settings = ReferenceSettings(engine=engine, num_chains=args.num_chains,
                                 max_seconds=args.max_seconds, target_floor=args.target_floor,
                                 **{k: v for k, v in per_chain.items() if v})  # fmt: skip
    result, assessment = sample_reference(model, data.x_test, settings)
    weights = sum(site.size for site in model.spec.sites())
    return {
        "dataset": name,
        "engine": engine,
        "suite": args.suite,
        "n_train": int(data.n_train),
        "weights": weights,
        "settings": settings.as_dict(),
        "trace": result.info["trace"],
        "stopped": result.info["stopped"],
        "dropped": {str(k): v for k, v in assessment.dropped.items()},
        "metrics": assessment.metrics(data.y_std if data.task == "regression" else 1.0),
        "versions": library_versions(),
        "machine": machine_info(),
        "commit": git_commit(Path(__file__).resolve().parent),
        "date": timestamp(),
        "command": " ".join(["python", "benchmarks/reference_floor.py", *sys.argv[1:]]),
    }


def from_results(folder: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The records of the split-0 references a benchmark run computed in ``folder`` (its
    ``references/<dataset>-split0/record.json``; its ``run.json``, or that of the suite's stored
    records, names the commit and command),
    for the data sets in ``args.datasets`` that it holds."""
    run_file = folder / "run.json"
    if not run_file.exists():  # a results folder: its run as stored by headline.py --store
        run_file = RESULTS.parent / args.suite / "run.json"
    run = json.loads(run_file.read_text())
    records = []
    for name in args.datasets.split(","):
        path = folder / "references" / f"{name}-split0" / "record.json"
        if not path.exists():
            continue
        cell = json.loads(path.read_text())
        if cell["status"] != "ok":
            raise SystemExit(f"{path}: the reference did not finish ({cell['status']})")
        with tempfile.TemporaryDirectory() as scratch:
            data, keywords = _data(name, args.suite, args.data_dir, Path(scratch))
        model = BNN(data.x_train, data.y_train, **keywords)
        settings = cell["config"]["reference"]
        metrics = {k: v for k, v in cell["metrics"].items()
                   if k in FLOOR_METRICS or k.startswith("floor_")}  # fmt: skip
        records.append(
            {
                "dataset": name,
                "engine": settings["engine"],
                "suite": cell["suite"],
                "n_train": int(cell["n_train"]),
                "weights": sum(site.size for site in model.spec.sites()),
                "settings": settings,
                "trace": cell["info"]["trace"],
                "stopped": cell["info"]["stopped"],
                "dropped": cell["info"]["chains"]["dropped"],
                "metrics": metrics,
                "versions": cell["versions"],
                "machine": cell["machine"],
                "commit": run["environment"]["git_commit"],
                "date": cell["finished_at"],
                "command": run["command"],
            }
        )
    return records


def _floor(entry: dict[str, Any]) -> float:
    return entry.get("ref_w2", entry.get("ref_tv", float("nan")))


def table() -> str:
    """The Markdown table of every record: per data set and engine, the floor after some
    batches (at most :data:`SHOWN_STEPS`; the record holds every one) against its chains and
    seconds, its Monte Carlo part at the end (the random split), where it stopped and the
    commit that made it."""
    lines = [
        "| data set | engine | weights x points | floor (chains kept / run, seconds) "
        "| Monte Carlo part | stopped | commit |",
        "|---|---|---|---|---|---|---|",
    ]
    for record in _records().values():
        trace = record["trace"]
        shown = [trace[i] for i in evenly(len(trace), SHOWN_STEPS)]
        steps = "; ".join(
            f"{_floor(e):.4f} ({e['kept']}/{e['chains']}, {e['seconds']:.0f} s)" for e in shown
        )
        size = f"{record['weights']:,} x {record['n_train']:,}"
        random = record["metrics"].get(
            "floor_w2_std_random", record["metrics"].get("floor_tv_random")
        )
        lines.append(
            f"| {record['dataset']} | {record['engine']} | {size} | {steps} | {random:.4f} "
            f"| {record['stopped']} | {record['commit'][:7]} |"
        )
    return "\n".join(lines)


def _records() -> dict[tuple[str, str], dict[str, Any]]:
    """Every committed record by (data set, engine)."""
    found = (json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json")))
    return {(record["dataset"], record["engine"]): record for record in found}


def engines(records: dict[tuple[str, str], dict[str, Any]] | None = None) -> str:
    """The Markdown table that sets each other engine's floor against :data:`DEFAULT_ENGINE`'s
    on the same data set, from ``records`` (default: the committed ones): the other's last
    floor (chains kept, seconds), the first batch of the default engine at or below it, and how
    many times the seconds that took the other engine; where the default engine never got that
    low, its lowest floor."""
    lines = [
        f"| data set | engine | its floor (chains kept, seconds) | {DEFAULT_ENGINE} at or below "
        "it (chains kept, seconds) | seconds, engine / " + DEFAULT_ENGINE + " |",
        "|---|---|---|---|---|",
    ]
    records = _records() if records is None else records
    for (dataset, engine), record in records.items():
        default = records.get((dataset, DEFAULT_ENGINE))
        if engine == DEFAULT_ENGINE or default is None:
            continue
        last = record["trace"][-1]
        hit = next((e for e in default["trace"] if _floor(e) <= _floor(last)), None)
        if hit is None:
            best = min(default["trace"], key=_floor)
            reached = (
                f"not reached: lowest {_floor(best):.4f} ({best['kept']}, {best['seconds']:.0f} s)"
            )
            ratio = "-"
        else:
            reached = f"{_floor(hit):.4f} ({hit['kept']}, {hit['seconds']:.0f} s)"
            ratio = f"{last['seconds'] / hit['seconds']:.1f}"
        lines.append(
            f"| {dataset} | {engine} | {_floor(last):.4f} ({last['kept']}, "
            f"{last['seconds']:.0f} s) | {reached} | {ratio} |"
        )
    return "\n".join(lines)


def write(page: Path) -> None:
    """Put :func:`table` and :func:`engines` between their markers on the page."""
    text = page.read_text()
    for (start, end), make in ((MARKERS, table), (ENGINE_MARKERS, engines)):
        pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"{page} has no {start} ... {end} block")
        text = pattern.sub(
            lambda _, make=make, start=start, end=end: f"{start}\n{make()}\n{end}", text
        )
    page.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--suite", default="uci", help="whose network (default: uci)")
    parser.add_argument("--datasets", default="bostonHousing,concrete,wine-quality-red,"
                        f"{CSV_NAME}")  # fmt: skip
    parser.add_argument("--engine", default="mclmc", help="mclmc, nuts, or both: mclmc,nuts")
    parser.add_argument("--num-chains", type=int, default=ReferenceSettings().num_chains)
    parser.add_argument("--max-seconds", type=float, default=ReferenceSettings().max_seconds)
    parser.add_argument("--target-floor", type=float, default=ReferenceSettings().target_floor)
    for flag in ("--num-warmup", "--num-samples", "--thinning", "--chains-per-batch"):
        parser.add_argument(flag, type=int, default=None, help="default: the engine's")
    parser.add_argument("--records", type=Path, default=RESULTS,
                        help="where the records go (default: the committed ones; another "
                             "folder keeps a trial of other settings apart)")  # fmt: skip
    parser.add_argument("--write", type=Path, default=None, help="only write the table here")
    parser.add_argument("--from-results", type=Path, default=None,
                        help="take the references a benchmark run computed in this results "
                             "folder instead of sampling them")  # fmt: skip
    args = parser.parse_args()
    if args.write is not None:
        write(args.write)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    configure_runtime(host_devices=1)
    args.records.mkdir(parents=True, exist_ok=True)
    if args.from_results is not None:
        records = from_results(args.from_results, args)
    else:
        records = (measure(name, engine, args) for name in args.datasets.split(",")
                   for engine in args.engine.split(","))  # fmt: skip
    for record in records:
        path = args.records / f"{record['dataset']}-{record['engine']}.json"
        path.write_text(json.dumps(record, indent=1) + "\n")
        logging.info("%s: %s", path, record["stopped"])


if __name__ == "__main__":
    main()
