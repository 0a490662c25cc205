"""The report of a sweep that is still running, or that stopped before its end, says so first:
how many cells are done and which are pending; a finished sweep's report says nothing of it."""

from __future__ import annotations

import re
import shutil
import time
from html import unescape
from pathlib import Path

from ppl_bnn.bench.lock import LOCK_FILE, hold_lock
from ppl_bnn.report import render_report
from ppl_bnn.report.live import LiveReport
from ppl_bnn.report.load import load_results, sweep_progress
from tests.bench.conftest import tiny_suite
from tests.report.builder import subset
from tests.report.helpers import section

KEPT = ("sine-split0-svi-pyro-seed0", "sine-split0-map-numpyro-seed0")
GONE = ("sine-split0-map-pyro-seed0", "blobs-split0-svi-pyro-seed0")


def _half_done(results_dir: Path, tmp_path: Path) -> Path:
    """A results folder whose suite.json lists four cells, two of them without a record yet."""
    root = subset(results_dir, tmp_path / "results", lambda r: r["cell_id"] in KEPT + GONE, True)
    for cell_id in GONE:
        shutil.rmtree(root / "cells" / cell_id)
    return root


def _progress(html: str) -> str:
    """The text of the progress box, checked to come before the first section."""
    match = re.search(r'<aside class="progress"[^>]*>(.*?)</aside>', html, flags=re.S)
    assert match is not None, "no progress box"
    assert match.start() < html.index('<p class="subtitle">') < html.index("<section")
    return unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def test_a_finished_sweep_has_no_progress_box(results_dir: Path, html: str) -> None:
    assert load_results(results_dir).progress == ""
    assert 'class="progress"' not in html


def test_a_running_sweep_says_what_is_done_and_names_the_pending_cells(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _half_done(results_dir, tmp_path)
    with hold_lock(root / LOCK_FILE):
        html = render_report(root).read_text(encoding="utf-8")
    text = _progress(html)
    text = text.removesuffix("; this page is updated as cells finish.")
    head, pending = text.split("; pending: ")
    assert head == "A sweep is running: 2 of 4 cells done"
    assert sorted(pending.split(", ")) == sorted(GONE)
    markdown = (root / "report.md").read_text(encoding="utf-8")
    assert markdown.splitlines()[2].startswith("> A sweep is running: 2 of 4 cells done")


def test_a_sweep_that_stopped_before_its_end_says_how_to_resume(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _half_done(results_dir, tmp_path)
    text = _progress(render_report(root).read_text(encoding="utf-8"))
    assert text.startswith("The last sweep stopped before its end: 2 of 4 cells done; pending: ")
    assert text.endswith("`ppl-bnn bench` with the same suite runs the rest.")


def test_the_live_report_renders_in_the_background_without_piling_up(
    results_dir: Path, tmp_path: Path
) -> None:
    root = _half_done(results_dir, tmp_path)
    live = LiveReport(root, min_interval_s=3600)
    with hold_lock(root / LOCK_FILE):
        live.update(["sine"])  # a dataset's first cells: rendered at once
        live.update(["sine"])  # one render at a time, and not due again for an hour
        assert live.renders == 1
        deadline = time.monotonic() + 300
        while live.running and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not live.running
        # The live render leaves PSIS-LOO for the render after the sweep, and says so.
        loo = section((root / "index.html").read_text(encoding="utf-8"), "loo")
        assert "Computed when the sweep has finished." in loo and "<table" not in loo
        live.update(["sine"])
        assert live.renders == 1
        live.update(["blobs"])  # a new dataset's first cells: rendered, whatever the interval
        assert live.renders == 2
        live.close()  # stops the render still running
    assert not live.running
    html = (root / "index.html").read_text(encoding="utf-8")
    assert _progress(html).startswith("A sweep is running: 2 of 4 cells done")
    assert not [p.name for p in root.iterdir() if p.name.startswith(".index.html")]
    # Rendered again from the stored results, as after the sweep: PSIS-LOO is computed.
    assert "Computed when the sweep has finished." not in render_report(root).read_text("utf-8")


def test_many_pending_cells_are_counted_per_dataset(tmp_path: Path) -> None:
    suite = tiny_suite(seeds=list(range(7)), datasets=[{"name": "sine"}, {"name": "gap"}])
    cells = [c.to_dict() for c in suite.cells()]
    text = sweep_progress(tmp_path, {"cells": cells}, [])
    assert text == (
        "The last sweep stopped before its end: 0 of 14 cells done; pending: 7 on sine, 7 on gap; "
        "`ppl-bnn bench` with the same suite runs the rest."
    )
