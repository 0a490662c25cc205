"""The reference-floor page's table is generated from the committed records
(``benchmarks/reference_floor.py``), and every record holds what the table and the note need."""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks" / "reference.md"


def _script():
    spec = importlib.util.spec_from_file_location(
        "reference_floor", ROOT / "benchmarks" / "reference_floor.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pages_tables_are_generated_from_the_committed_records() -> None:
    script = _script()
    text = PAGE.read_text()
    for (start, end), make in (
        (script.MARKERS, script.table),
        (script.ENGINE_MARKERS, script.engines),
    ):
        block = text[text.index(start) + len(start) : text.index(end)].strip()
        assert block == make(), "run python benchmarks/reference_floor.py --write " + str(PAGE)


def test_each_engine_is_set_against_the_first_mclmc_batch_that_reaches_its_floor() -> None:
    script = _script()

    def record(dataset: str, engine: str, *floors: tuple[int, float, float]) -> dict:
        trace = [{"chains": c, "kept": c, "seconds": t, "ref_w2": w} for c, t, w in floors]
        return {"dataset": dataset, "engine": engine, "trace": trace}

    records = {
        ("boston", "mclmc"): record(
            "boston", "mclmc", (16, 30, 0.03), (32, 60, 0.018), (48, 90, 0.012)
        ),
        ("boston", "nuts"): record("boston", "nuts", (16, 300, 0.02)),
        ("wine", "mclmc"): record("wine", "mclmc", (16, 50, 0.03), (32, 100, 0.025)),
        ("wine", "nuts"): record("wine", "nuts", (16, 800, 0.015)),
        ("yacht", "nuts"): record("yacht", "nuts", (16, 100, 0.02)),  # no MCLMC record: left out
    }
    lines = script.engines(records).splitlines()[2:]
    assert lines == [
        "| boston | nuts | 0.0200 (16, 300 s) | 0.0180 (32, 60 s) | 5.0 |",
        "| wine | nuts | 0.0150 (16, 800 s) | not reached: lowest 0.0250 (32, 100 s) | - |",
    ]


def test_every_record_holds_its_trace_settings_and_provenance() -> None:
    records = sorted(_script().RESULTS.glob("*.json"))
    if not records:
        pytest.skip("no records in benchmarks/results/reference/ yet")
    for path in records:
        record = json.loads(path.read_text())
        assert path.name == f"{record['dataset']}-{record['engine']}.json"
        trace = record["trace"]
        assert trace and all(a["seconds"] < b["seconds"] for a, b in itertools.pairwise(trace))
        assert [t["chains"] for t in trace] == sorted(t["chains"] for t in trace)
        assert record["settings"]["engine"] == record["engine"]
        assert record["command"].startswith(("python benchmarks/reference_floor.py", "nox"))
        assert record["commit"] and record["versions"]["numpyro"]


def test_a_runs_reference_becomes_a_record_with_the_runs_commit_and_command(
    tmp_path: Path,
) -> None:
    """``--from-results``: a benchmark run's split-0 reference (its cell record) becomes a floor
    record; the run's commit and command are its provenance, and a failed one is refused."""
    script = _script()
    trace = [{"chains": 16, "kept": 16, "seconds": 30.0, "ref_w2": 0.03}]
    cell = {
        "status": "ok", "suite": "uci", "n_train": 397, "finished_at": "2026-11-29T01:00:00",
        "config": {"reference": {"engine": "mclmc", "num_chains": 16}},
        "info": {"trace": trace, "stopped": "ran 16 of at most 16 chains",
                 "chains": {"dropped": {"3": "a draw is not finite"}}},
        "metrics": {"chains_run": 16.0, "floor_w2_std": 0.03, "rmse": 0.7},
        "versions": {"numpyro": "0.22.0"}, "machine": {"cores": 2},
    }  # fmt: skip
    folder = tmp_path / "references" / f"{script.CSV_NAME}-split0"
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(json.dumps(cell))
    run = {"environment": {"git_commit": "abc"}, "command": "nox -s bench -- --suite uci"}
    (tmp_path / "run.json").write_text(json.dumps(run))
    args = argparse.Namespace(datasets=f"{script.CSV_NAME},concrete", suite="uci", data_dir=None)
    (record,) = script.from_results(tmp_path, args)  # concrete is not in the run: left out
    assert record["trace"] == trace and record["engine"] == "mclmc"
    assert record["metrics"] == {"chains_run": 16.0, "floor_w2_std": 0.03}
    assert record["dropped"] == {"3": "a draw is not finite"} and record["weights"] > 0
    assert (record["commit"], record["command"]) == ("abc", run["command"])
    (folder / "record.json").write_text(json.dumps({**cell, "status": "timeout"}))
    with pytest.raises(SystemExit, match="the reference did not finish"):
        script.from_results(tmp_path, args)
