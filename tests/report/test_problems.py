"""What a report could not read is said, in a Problems box above the Summary; a failed rerun
shows beside the result it left in place; names are escaped wherever they are shown."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

from ppl_bnn.bench.record import read_record, write_attempt
from ppl_bnn.report import render_report
from ppl_bnn.report.document import Document, Paragraph, Section
from ppl_bnn.report.html import render_html
from ppl_bnn.report.load import load_results
from ppl_bnn.report.markdown import render_markdown
from tests.report.builder import subset
from tests.report.helpers import row, section, tables

SVI = "sine-split0-svi-pyro-seed0"
MAP_NP = "sine-split0-map-numpyro-seed0"
MAP_PYRO = "sine-split0-map-pyro-seed0"
BLOBS = "blobs-split0-svi-pyro-seed0"


def _copy(results_dir: Path, tmp_path: Path) -> Path:
    """A results folder of four cells with files (two datasets) and the references."""
    keep = {SVI, MAP_NP, MAP_PYRO, BLOBS}
    return subset(results_dir, tmp_path / "results", lambda r: r["cell_id"] in keep, True)


def _box(html: str) -> str:
    """The text of the Problems box, checked to come before the first section."""
    match = re.search(r'<aside class="problems"[^>]*>(.*?)</aside>', html, flags=re.S)
    assert match is not None, "no Problems box"
    assert match.start() < html.index("<section")
    return unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def test_a_complete_results_folder_has_no_problems_box(results_dir: Path, html: str) -> None:
    assert load_results(results_dir).problems == []
    assert 'class="problems"' not in html


def test_everything_unreadable_or_stale_is_listed_above_the_summary(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _copy(results_dir, tmp_path)
    cells = root / "cells"
    (cells / MAP_PYRO / "record.json").write_text('{"schema_version": 1, "cell_id": ')
    predictions = cells / SVI / "predictions.nc"
    predictions.write_bytes(predictions.read_bytes()[:500])
    (cells / MAP_NP / "inference_data.nc").unlink()
    record = json.loads((cells / BLOBS / "record.json").read_text())
    record["config"]["options"]["num_steps"] = 1  # as if stored by an earlier suite
    record["config_hash"] = "0" * 64
    (cells / BLOBS / "record.json").write_text(json.dumps(record))
    (root / "references" / "blobs-split1" / "reference.json").write_text("{")

    html = render_report(root).read_text(encoding="utf-8")
    box = _box(html)
    assert "Problems (5)" in box
    assert f"cells/{MAP_PYRO}/record.json unreadable (JSONDecodeError" in box
    assert "this cell is left out of every table" in box
    assert f"cells/{SVI}/predictions.nc is unreadable" in box
    assert f"cells/{MAP_NP}/inference_data.nc is missing" in box
    stale = "1 cell stored with another configuration than the suite's (suite.json, as it last ran)"
    assert stale in box
    assert BLOBS in box
    assert "references/blobs-split1/reference.json is unreadable" in box
    titles = re.findall(r"<h2>(.*?)</h2>", html.split("</nav>", 1)[1])
    assert titles[0] == "Summary"  # the box is not a section: the Summary stays first
    markdown = (root / "report.md").read_text(encoding="utf-8")
    head = markdown.split("**Contents**")[0]
    assert "> **Problems** (5):" in head and f"> - cells/{MAP_PYRO}/record.json" in head


def test_an_unreadable_or_missing_suite_file_is_a_problem_not_a_crash(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _copy(results_dir, tmp_path)
    (root / "suite.json").write_text('{"name": "tiny", "cells": [')
    box = _box(render_report(root).read_text(encoding="utf-8"))
    assert "suite.json is unreadable (JSONDecodeError" in box
    (root / "suite.json").unlink()
    box = _box(render_report(root).read_text(encoding="utf-8"))
    assert "suite.json is missing" in box


def test_cells_outside_the_suite_as_last_run_are_flagged(results_dir: Path, tmp_path: Path) -> None:
    root = _copy(results_dir, tmp_path)
    suite = json.loads((root / "suite.json").read_text())
    records = {d.name: read_record(d) for d in (root / "cells").iterdir()}
    configs = {cid: r["config_hash"] for cid, r in records.items() if cid != MAP_NP}
    (root / "suite.json").write_text(json.dumps({**suite, "configs": configs}))
    problems = load_results(root).problems
    assert problems == [
        "1 cell outside the suite (suite.json, as it last ran): results of an earlier version "
        f"of the suite, left out of every table and figure ({MAP_NP}); delete their folders under "
        "cells/ to leave them out"
    ]


def test_a_failed_rerun_shows_beside_the_result_it_kept(results_dir: Path, tmp_path: Path) -> None:
    root = _copy(results_dir, tmp_path)
    record = read_record(root / "cells" / SVI)
    assert record is not None
    error = {"type": "Timeout", "message": "the cell exceeded its 1 s limit", "traceback": "tb"}
    attempt = {**record, "status": "timeout", "error": error, "kept": "ok",
               "finished_at": "2030-01-01T00:00:00+00:00"}  # fmt: skip
    write_attempt(root / "cells" / SVI, attempt)
    html = render_report(root).read_text(encoding="utf-8")
    shown = row(tables(section(html, "sine-problems"))[0], "svi", "pyro")
    assert shown["status"] == "ok, rerun failed" and shown["error"] == "Timeout"
    assert "a rerun on 2030-01-01T00:00:00+00:00 ended timeout" in shown["message"]
    assert "the earlier ok result, shown everywhere, is kept" in shown["message"]
    main = tables(section(html, "dataset-sine"))[0]
    assert row(main, "svi", "pyro")["cells"] == "1 ok"  # its result still counts


def test_hostile_names_are_escaped_in_markdown_and_html() -> None:
    name = "<script>alert(1)</script> *x* _y_ [z](http://e) # | `c` &amp;"
    problems = ((f"cells/{name}/record.json missing",),)
    document = Document(
        f"Benchmark report: {name}",
        name,
        [Section(name, "summary", [Paragraph.of(name)])],
        problems,
    )
    markdown = render_markdown(document)
    for line in markdown.splitlines():
        assert "<script>" not in line and "*x*" not in line and "[z]" not in line, line
    assert markdown.startswith("# Benchmark report: \\<script\\>alert(1)\\</script\\> \\*x\\*")
    assert "## \\<script\\>" in markdown
    html = render_html(document)
    assert "<script>" not in html and html.count("&lt;script&gt;") == 7


def test_a_record_without_metrics_and_a_damaged_reference_are_problems_not_results(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _copy(results_dir, tmp_path)
    record = json.loads((root / "cells" / MAP_NP / "record.json").read_text())
    (root / "cells" / MAP_NP / "record.json").write_text(json.dumps({**record, "metrics": {}}))
    fitted = [e for e in load_results(root).references.values() if e.status == "ok"]
    assert fitted, "the tiny suite has a computed reference"
    damaged = fitted[0].folder / "predictions.nc"
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    results = load_results(root)
    assert MAP_NP not in {r["cell_id"] for r in results.records}
    assert f"cells/{MAP_NP}/record.json says ok but holds no metrics" in " ".join(results.problems)
    assert (fitted[0].dataset, fitted[0].split) not in results.references
    name = fitted[0].folder.name
    assert f"references/{name}/predictions.nc is unreadable" in " ".join(results.problems)


def test_cells_of_an_earlier_configuration_are_not_averaged_with_the_current_ones(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _copy(results_dir, tmp_path)
    record = json.loads((root / "cells" / MAP_PYRO / "record.json").read_text())
    record["config_hash"] = "0" * 64  # as if stored before an edit of the method's options
    (root / "cells" / MAP_PYRO / "record.json").write_text(json.dumps(record))
    results = load_results(root)
    assert MAP_PYRO not in set(results.cells["cell_id"])
    assert MAP_NP in set(results.cells["cell_id"])
    (problem,) = results.problems
    assert problem.startswith("1 cell stored with another configuration than the suite's")
    assert f"left out of every table and figure ({MAP_PYRO})" in problem


def test_a_reference_of_the_earlier_format_counts_as_missing_and_is_named(
    results_dir: Path, tmp_path: Path
) -> None:
    """A ``reference.json`` of format 1 (a NUTS run gated on R-hat, before chain ensembles and
    floors) is not read: its split has no reference, and the Problems box says why."""
    root = _copy(results_dir, tmp_path)
    old = {
        "format": 1, "dataset": "blobs", "split": 0, "status": "ok", "note": None,
        "converged": True, "gate": {"rhat_max": 1.01, "ess_bulk_min": 400}, "diagnostics": {},
    }  # fmt: skip
    (root / "references" / "blobs-split0" / "reference.json").write_text(json.dumps(old))
    results = load_results(root)
    assert ("blobs", 0) not in results.references and ("sine", 0) in results.references
    assert (
        "references/blobs-split0/reference.json is of an earlier format (1, not 2): it is left "
        "out, as if there were no reference; `ppl-bnn bench` computes it again"
    ) in results.problems
