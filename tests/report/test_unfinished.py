"""A report of runs that did not finish: every cell failed or timed out, or the reference
posterior failed."""

from __future__ import annotations

import json
import logging
import re
from html import unescape
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ppl_bnn.report import render_report
from ppl_bnn.report.reference_entries import REFERENCE_RETRY
from ppl_bnn.report.stats import group_stats
from tests.report.helpers import section
from tests.report.unfinished_records import CRASH, MEMORY, write_failed, write_ranked


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def _render(root: Path, caplog: pytest.LogCaptureFixture) -> str:
    """The report's HTML, checked to have logged no error."""
    with caplog.at_level(logging.ERROR):
        html = render_report(root).read_text(encoding="utf-8")
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert "Parts that could not be built" not in html
    return html


def test_the_stats_of_no_finished_cell_keep_the_group_columns() -> None:
    cells = pd.DataFrame(
        {"dataset": ["d"], "method": ["map"], "backend": ["numpyro"], "status": ["failed"],
         "time_cell_wall": [0.1]}
    )  # fmt: skip
    stats = group_stats(cells, ["time_cell_wall"])
    assert stats.empty and {"dataset", "method", "backend", "cells"} <= set(stats.columns)


def test_a_report_whose_every_cell_failed_renders_whole_and_names_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = write_failed(tmp_path / "results")
    html = _render(root, caplog)
    summary = _text(section(html, "summary-d"))
    assert "No cell produced a result" in summary
    assert "map/numpyro: 1 of 1 cells failed (InsufficientMemoryError)" in summary
    assert "svi/pyro: 1 of 1 cells timed out (Timeout)" in summary
    problems = _text(section(html, "d-problems"))
    assert "InsufficientMemoryError" in problems and MEMORY in problems
    assert "d-split0-map-numpyro-seed0: failed, InsufficientMemoryError" in problems
    assert "the cell exceeded its 60 s limit" in problems
    overview = _text(section(html, "overview"))
    assert "nan" not in overview  # no task is known: blank, not "nan"
    markdown = (root / "report.md").read_text(encoding="utf-8")
    assert "No cell produced a result" in markdown


#: What the Summary says of the failed reference of :func:`write_ranked`.
FAILED_REFERENCE = f"the reference failed (split 0: {CRASH})"


@pytest.mark.parametrize(
    ("reference", "summary", "why"),
    [
        (
            {"status": "failed", "note": f"{CRASH}\nsecond line"},
            f"The reference failed (split 0: {CRASH}), so fidelity is not shown",
            f"held-out test log-likelihood: {FAILED_REFERENCE}; {REFERENCE_RETRY}",
        ),
        (
            {"status": "infeasible", "note": "too many weights"},
            "No reference posterior (too many weights), so fidelity is not shown",
            "held-out test log-likelihood (no reference could be computed)",
        ),
        (
            None,
            "No reference posterior: the suite computes none, so fidelity is not shown",
            "held-out test log-likelihood (no reference posterior)",
        ),
    ],
    ids=["failed", "infeasible", "none"],
)
def test_the_summary_names_a_failed_reference_and_its_cause(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    reference: dict[str, Any] | None,
    summary: str,
    why: str,
) -> None:
    root = write_ranked(tmp_path / "results", reference)
    html = _render(root, caplog)
    text = _text(section(html, "summary-d"))
    markdown = (root / "report.md").read_text(encoding="utf-8")
    (verdict,) = json.loads((root / "summary.json").read_text())["datasets"]
    assert verdict["basis_why"] == why
    sentence = f"Ranked on {why}."
    assert verdict["sentence"].endswith(sentence)
    for shown in (text, markdown.replace("**", "")):
        assert summary in shown
        assert sentence in shown
    failed = reference is not None and reference["status"] == "failed"
    assert (REFERENCE_RETRY in text) == failed
    assert "second line" not in text
