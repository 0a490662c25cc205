"""The reference-floor page's table is generated from the committed records
(``benchmarks/reference_floor.py``), and every record holds what the table and the note need."""

from __future__ import annotations

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


def test_the_pages_table_is_generated_from_the_committed_records() -> None:
    script = _script()
    start, end = script.MARKERS
    text = PAGE.read_text()
    block = text[text.index(start) + len(start) : text.index(end)].strip()
    assert block == script.table(), "run python benchmarks/reference_floor.py --write " + str(PAGE)


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
