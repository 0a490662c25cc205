"""The README's headline results and the benchmark pages' tables are what the committed records
give (``benchmarks/headline.py``; the docs render its tables at build time through
``docs/_ext/records.py``): a record that changes fails this test until the README is
regenerated from it, and changes every table drawn from it."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("headline", ROOT / "benchmarks" / "headline.py")
headline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(headline)

#: The suites with records: folders with a suite file (``reference/`` holds reference floors).
SUITES = sorted(p.name for p in headline.RESULTS.iterdir() if (p / "suite.toml").is_file())


def test_the_readmes_headline_is_generated_from_the_committed_records() -> None:
    assert headline.block(ROOT / "README.md", "default") == headline.headline("default")


@pytest.mark.parametrize("suite", SUITES)
def test_the_records_agree_with_each_other(suite: str) -> None:
    """The Summary's verdict covers the datasets of the cells, the run counts them and names
    its command, and the suite file is the one in ``benchmarks/``."""
    folder = headline.RESULTS / suite
    cells = pd.read_csv(folder / "results.csv")
    summary = json.loads((folder / "summary.json").read_text())
    run = json.loads((folder / "run.json").read_text())
    contested = set(
        cells["dataset"] if "sweep" not in cells else cells.loc[cells["sweep"].isna(), "dataset"]
    )
    assert {d["dataset"] for d in summary["datasets"]} == contested
    assert run["cells"] == len(cells) and (cells["status"] == "ok").all()
    assert run["command"]
    assert (folder / "suite.toml").read_text() == (
        ROOT / "benchmarks" / f"{suite}.toml"
    ).read_text()


@pytest.mark.parametrize("suite", SUITES)
def test_every_docs_table_renders_from_the_records(suite: str) -> None:
    """Each table a page can ask for is a Markdown table (``published`` only where the suite
    has data sets with published figures)."""
    for name, render in headline.TABLES.items():
        table = render(suite)
        if name == "published" and suite == "default":
            assert table == "", "the default suite's sets have no published figures"
        else:
            assert "|---" in table, f"{name} of {suite} has no table"


@pytest.fixture
def copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the default suite's records that ``headline`` reads instead."""
    copy = tmp_path / "default"
    shutil.copytree(headline.RESULTS / "default", copy)
    monkeypatch.setattr(headline, "RESULTS", tmp_path)
    return copy


def test_a_changed_verdict_changes_the_headline_and_the_standings(copied: Path) -> None:
    before = {name: headline.TABLES[name]("default") for name in ("headline", "standings")}
    summary = json.loads((copied / "summary.json").read_text())
    summary["datasets"][0]["standings"][0]["value"] += 1.0
    (copied / "summary.json").write_text(json.dumps(summary))
    for name, table in before.items():
        assert headline.TABLES[name]("default") != table, name


def test_a_changed_cell_changes_the_metrics_table(copied: Path) -> None:
    before = headline.metrics("default")
    cells = pd.read_csv(copied / "results.csv")
    first = cells.index[cells["sweep"].isna()][0]
    cells.loc[first, "time_total"] += 100.0
    cells.to_csv(copied / "results.csv", index=False)
    assert headline.metrics("default") != before


def test_a_changed_run_changes_the_run_table(copied: Path) -> None:
    before = headline.run_table("default")
    run = json.loads((copied / "run.json").read_text())
    run["command"] = "nox -s bench -- --jobs 1"
    (copied / "run.json").write_text(json.dumps(run))
    assert headline.run_table("default") != before


@pytest.mark.parametrize("suite", SUITES)
def test_the_run_table_describes_the_reference_its_suite_sampled(suite: str) -> None:
    """The engine and budget of the chain ensemble as the run's settings give them, and no
    setting its engine does not read."""
    reference = json.loads((headline.RESULTS / suite / "run.json").read_text())["reference"]
    (row,) = [r for r in headline.run_table(suite).splitlines() if "reference posterior" in r]
    assert f"{reference['engine'].upper()} chain ensemble" in row
    assert f"{reference['num_chains']} chains have run" in row and "None" not in row


def test_the_reference_row_names_only_the_settings_an_engine_reads() -> None:
    nuts = {
        "engine": "nuts", "num_chains": 8, "chains_per_batch": None, "target_floor": 0.02,
        "max_seconds": 300.0, "num_warmup": 500, "num_samples": 400, "thinning": None,
        "max_tree_depth": 8, "target_accept": 0.9,
    }  # fmt: skip
    assert headline.reference_settings(nuts) == (
        "NUTS chain ensemble from deep-ensemble starts: batches of 8 chains of 500 warm-up "
        "steps + 400 draws (tree depth <= 8, target acceptance 0.9), until its floor is 0.02, "
        "8 chains have run or 300 s are spent"
    )


def test_storing_a_run_needs_its_command(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        headline.main(["--store", str(tmp_path)])


@pytest.mark.parametrize("suite", SUITES)
def test_the_summary_is_what_the_rule_gives_on_the_stored_cells(suite: str) -> None:
    """Every committed ``summary.json`` is what the rule as it is gives on its ``results.csv``
    (grades, numbers, comparisons, sentences; the suite file's margins): a change of the rule
    fails this test until the records are regenerated (``nox -s report`` and ``--store``, or
    ``headline.py --verdict`` where the results folder is not at hand)."""
    stored = json.loads((headline.RESULTS / suite / "summary.json").read_text())["datasets"]
    assert headline.verdicts(suite) == stored


@pytest.mark.parametrize("suite", SUITES)
def test_no_as_good_contestant_leaves_its_margin(suite: str) -> None:
    """In the committed records, every contestant graded "as good" has a paired comparison
    with the trusted one whose 90% interval lies inside its margin, on at least two seeds;
    a contestant whose interval reaches the margin is never "as good"."""
    checked = 0
    for dataset in json.loads((headline.RESULTS / suite / "summary.json").read_text())["datasets"]:
        for standing in dataset["standings"]:
            comparison = standing.get("comparison")
            if comparison is None:
                continue
            low, high, margin = comparison["low"], comparison["high"], comparison["margin"]
            inside = low is not None and -margin < low <= high < margin  # None: one seed
            assert (standing["grade"] == "as good") == (inside and comparison["pairs"] >= 2), (
                dataset["dataset"],
                standing["method"],
            )
            checked += 1
    assert checked > 0


def test_the_auto_seeds_measurement_renders_and_names_its_run() -> None:
    """docs/guide/suites.md renders benchmarks/results/auto_seeds.json: every round after the
    first adds seeds past 2, and the record names the command and commit that made it."""
    spec = importlib.util.spec_from_file_location(
        "auto_seeds", ROOT / "benchmarks" / "auto_seeds.py"
    )
    auto_seeds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(auto_seeds)
    found = json.loads(auto_seeds.RECORD.read_text())
    assert found["command"] and found["git_commit"]
    assert found["rounds"][0]["seeds"] == [0, 1, 2]
    assert all(max(r["seeds"]) >= 3 for r in found["rounds"][1:])
    text = auto_seeds.markdown(found)
    assert "| round | seeds |" in text and "| dataset | at three seeds |" in text
    assert all(f"| {dataset} |" in text for dataset in found["grades"])


def test_a_stored_run_says_how_warm_jaxs_cache_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--store`` sums the cells' ``compilation`` into ``run.json``; the headline and the run
    table say how many programs were loaded from the cache, which the wall time depends on."""
    results = tmp_path / "reports" / "default"
    shutil.copytree(headline.RESULTS / "default", results)
    suite_run = json.loads((results / "run.json").read_text())
    suite_json = {
        "name": "default",
        "environment": suite_run["environment"],
        "cells": ["c"] * suite_run["cells"],
        "runs": suite_run["runs"],
    }
    (results / "suite.json").write_text(json.dumps(suite_json))
    for i, counts in enumerate([(17, 7), (0, 3), (5, 0)]):
        cell = results / "cells" / f"cell{i}"
        cell.mkdir(parents=True)
        compiled, loaded = counts
        record = {"compilation": {"xla_compiles": compiled, "jax_cache_hits": loaded}}
        (cell / "record.json").write_text(json.dumps(record))
    (results / "cells" / "no-count").mkdir()  # a record without counts (a Pyro cell's)
    (results / "cells" / "no-count" / "record.json").write_text("{}")
    monkeypatch.setattr(headline, "RESULTS", tmp_path / "kept")
    folder = headline.store(results, "nox -s bench")
    assert json.loads((folder / "run.json").read_text())["compilation"] == {
        "xla_compiles": 22,
        "jax_cache_hits": 10,
    }
    assert ", 10 of 32 programs loaded from JAX's cache;" in headline.headline("default")
    assert "10 of 32 programs loaded" in headline.run_table("default")
