"""A render keeps each dataset's figures; the next draws only those of datasets that changed."""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

import pytest

from ppl_bnn.report import figures, render_report
from ppl_bnn.report.figure_memo import MEMO_DIR


@pytest.fixture
def folder(results_dir: Path, tmp_path: Path) -> Path:
    """A copy of the tiny suite's results, without a memo."""
    copy = tmp_path / "results"
    shutil.copytree(results_dir, copy, ignore=shutil.ignore_patterns("report-cache"))
    return copy


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (figure, dataset) pairs drawn from here on."""
    calls: list[tuple[str, str]] = []

    def counting(draw):
        @functools.wraps(draw)
        def wrapper(results, dataset):
            calls.append((draw.__name__, dataset))
            return draw(results, dataset)

        return wrapper

    monkeypatch.setattr(figures, "DATASET_FIGURES", tuple(map(counting, figures.DATASET_FIGURES)))
    return calls


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "figures").glob("*.png"))}


def test_a_second_render_reads_every_figure_back_unchanged(
    folder: Path, drawn: list[tuple[str, str]]
) -> None:
    render_report(folder)
    first = _pngs(folder)
    assert {d for _, d in drawn} == {"sine", "blobs"} and first
    drawn.clear()
    render_report(folder)
    assert drawn == []
    assert _pngs(folder) == first


def test_the_end_of_a_sweep_redraws_nothing(folder: Path, drawn: list[tuple[str, str]]) -> None:
    render_report(folder)
    drawn.clear()
    # What a sweep writes into suite.json as it ends: its run, environment and wall time.
    suite = json.loads((folder / "suite.json").read_text())
    suite["runs"] = [*suite.get("runs", []), {"started_at": "now", "finished_at": "later"}]
    suite["environment"], suite["wall_s"] = {"date": "today"}, 1234.5
    (folder / "suite.json").write_text(json.dumps(suite))
    render_report(folder)
    assert drawn == []


def test_a_changed_cell_redraws_its_datasets_figures_alone(
    folder: Path, drawn: list[tuple[str, str]]
) -> None:
    render_report(folder)
    kept = len(list((folder / MEMO_DIR).glob("*.json")))
    drawn.clear()
    predictions = folder / "cells" / "blobs-split0-svi-pyro-seed0" / "predictions.nc"
    stat = predictions.stat()
    os.utime(predictions, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    render_report(folder)
    assert drawn and {d for _, d in drawn} == {"blobs"}
    # The blobs figures of the first render are forgotten: as many entries as before.
    assert len(list((folder / MEMO_DIR).glob("*.json"))) == kept


def test_an_unreadable_memo_entry_is_drawn_again(
    folder: Path, drawn: list[tuple[str, str]]
) -> None:
    render_report(folder)
    first = _pngs(folder)
    for path in (folder / MEMO_DIR).glob("*.json"):
        path.write_text("{ not json")
    drawn.clear()
    render_report(folder)
    assert {d for _, d in drawn} == {"sine", "blobs"}
    assert _pngs(folder) == first
