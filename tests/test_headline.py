"""The README's headline results are what the committed records give
(``benchmarks/headline.py``): a record that changes fails this test until the README is
regenerated from it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("headline", ROOT / "benchmarks" / "headline.py")
headline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(headline)


def test_the_readmes_headline_is_generated_from_the_committed_records() -> None:
    assert headline.block(ROOT / "README.md", "default") == headline.headline("default")


def test_the_records_agree_with_each_other() -> None:
    """The Summary's verdict covers the datasets of the cells, and the run counts them."""
    folder = headline.RESULTS / "default"
    cells = pd.read_csv(folder / "results.csv")
    summary = json.loads((folder / "summary.json").read_text())
    run = json.loads((folder / "run.json").read_text())
    contested = set(cells.loc[cells["sweep"].isna(), "dataset"])
    assert {d["dataset"] for d in summary["datasets"]} == contested
    assert run["cells"] == len(cells) and (cells["status"] == "ok").all()
    assert (folder / "suite.toml").read_text() == (ROOT / "benchmarks" / "default.toml").read_text()


def test_a_changed_record_changes_the_headline(tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "default"
    copy.mkdir()
    for name in ("summary.json", "run.json"):
        (copy / name).write_bytes((headline.RESULTS / "default" / name).read_bytes())
    monkeypatch.setattr(headline, "RESULTS", tmp_path)
    before = headline.headline("default")
    summary = json.loads((copy / "summary.json").read_text())
    summary["datasets"][0]["standings"][0]["value"] += 1.0
    (copy / "summary.json").write_text(json.dumps(summary))
    assert headline.headline("default") != before
