"""A render keeps each dataset's figures; the next draws only those of datasets that changed
(in a copy of a folder rendered once, its memo copied with it)."""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path

import pytest

from ppl_bnn.report import figures, render_report
from ppl_bnn.report.figure_memo import MEMO_DIR


def _counting(calls: list[tuple[str, str]]):
    """A figure function that records the (figure, dataset) pairs it draws."""

    def wrap(draw):
        @functools.wraps(draw)
        def wrapper(results, dataset):
            calls.append((draw.__name__, dataset))
            return draw(results, dataset)

        return wrapper

    return tuple(map(wrap, figures.DATASET_FIGURES))


@pytest.fixture(scope="module")
def rendered(results_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """The tiny suite's results rendered once from no memo, and the datasets drawn then."""
    folder = tmp_path_factory.mktemp("rendered") / "results"
    shutil.copytree(results_dir, folder, ignore=shutil.ignore_patterns("report-cache"))
    calls: list[tuple[str, str]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(figures, "DATASET_FIGURES", _counting(calls))
        render_report(folder)
    return folder, {d for _, d in calls}


@pytest.fixture
def folder(rendered: tuple[Path, set[str]], tmp_path: Path) -> Path:
    """A copy of the rendered folder, its memo and figures with it."""
    copy = tmp_path / "results"
    shutil.copytree(rendered[0], copy)
    return copy


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (figure, dataset) pairs drawn from here on."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(figures, "DATASET_FIGURES", _counting(calls))
    return calls


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "figures").glob("*.png"))}


def test_a_second_render_reads_every_figure_back_unchanged(
    rendered: tuple[Path, set[str]], folder: Path, drawn: list[tuple[str, str]]
) -> None:
    first = _pngs(folder)
    assert rendered[1] == {"sine", "blobs"} and first
    render_report(folder)
    assert drawn == []
    assert _pngs(folder) == first


def test_the_end_of_a_sweep_redraws_nothing(folder: Path, drawn: list[tuple[str, str]]) -> None:
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
    kept = len(list((folder / MEMO_DIR).glob("*.json")))
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
    first = _pngs(folder)
    for path in (folder / MEMO_DIR).glob("*.json"):
        path.write_text("{ not json")
    render_report(folder)
    assert {d for _, d in drawn} == {"sine", "blobs"}
    assert _pngs(folder) == first
