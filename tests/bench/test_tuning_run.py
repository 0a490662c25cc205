"""A tuned contestant run for real (Pyro MAP on the sine set) and stated in the report."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ppl_bnn.bench.cell import Cell, base_record
from ppl_bnn.bench.record import read_records, write_record
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.report import render_report
from ppl_bnn.report.document import Strong
from ppl_bnn.report.load import load_results
from ppl_bnn.report.tuning import tuning_notes
from tests.bench.conftest import tiny_suite


def test_a_tuned_cell_runs_beside_the_untuned_one_and_the_report_states_its_tuning(
    tmp_path: Path,
) -> None:
    # Pyro: no compilation, so the three fits of the tuned cell take seconds.
    methods = {"map": {"num_steps": 40, "tune": {"grid": {"noise": [0.3, 1.0]}}}}
    suite = tiny_suite(backends=["pyro"], methods=methods)
    results = tmp_path / "results"
    assert run_suite(suite, results, jobs=2).ok
    records = {r["cell_id"]: r for r in read_records(results)}
    assert sorted(records) == ["sine-split0-map-pyro-seed0", "sine-split0-map-tuned-pyro-seed0"]
    plain, tuned = (
        records["sine-split0-map-pyro-seed0"],
        records["sine-split0-map-tuned-pyro-seed0"],
    )
    assert plain["status"] == tuned["status"] == "ok"
    assert "tuning" not in plain["info"] and "tuning" not in plain["timings"]
    tuning = tuned["info"]["tuning"]
    assert tuning["grid"] == {"noise": [0.3, 1.0]} and tuning["validation_fraction"] == 0.2
    assert (tuning["n_fit"], tuning["n_validation"]) == (26, 6)  # sine: 32 training points
    scores = [s["score"] for s in tuning["scores"]]
    assert all(math.isfinite(s) for s in scores)
    assert tuning["chosen"] == tuning["scores"][scores.index(max(scores))]["settings"]
    assert tuned["timings"]["tuning"] == tuning["seconds"] > 0
    # The cell's own fit used the chosen noise on the whole training set.
    assert tuned["config"]["tune"] == {"grid": {"noise": [0.3, 1.0]}, "validation_fraction": 0.2}
    loaded = load_results(results)
    assert list(loaded.cells["method"]) == ["map", "map (tuned)"]
    html = render_report(results, tmp_path / "report").read_text(encoding="utf-8")
    assert "map (tuned)" in html
    assert "tuned on a 20% validation split of each training set" in html
    assert "noise {0.3, 1}" in html and "tuning s" in html


def _record(cell: Cell, status: str = "ok", tuning: dict[str, Any] | None = None) -> dict:
    record = base_record(cell)
    record.update(status=status, metrics={"test_ll": -1.0, "rmse": 0.5})
    if tuning is not None:
        record["info"] = {"tuning": tuning}
    return record


def _tuning(chosen: dict[str, Any], broken: int = 0, seconds: float = 4.0) -> dict[str, Any]:
    scores = [{"settings": chosen, "score": -1.0, "status": "ok"}]
    scores += [{"settings": chosen, "score": None, "status": "diverged"}] * broken
    return {"chosen": chosen, "scores": scores, "seconds": seconds}


def test_the_tuning_statement_counts_the_choices_from_the_stored_records(
    tmp_path: Path,
) -> None:
    grid = {
        "grid": {"noise": ["learned", 1.0], "num_steps": [100, 400]},
        "validation_fraction": 0.25,
    }
    cells = [
        Cell(suite="t", dataset="sine", split=k, method="map", backend="pyro", seed=0, tune=grid)
        for k in range(3)
    ]
    records = [
        _record(cells[0], tuning=_tuning({"noise": "learned", "num_steps": 400}, broken=1)),
        _record(cells[1], tuning=_tuning({"noise": "learned", "num_steps": 400}, seconds=8.0)),
        _record(cells[2], tuning=_tuning({"noise": 1.0, "num_steps": 100})),
        _record(Cell(suite="t", dataset="sine", split=0, method="map", backend="pyro", seed=0)),
        _record(Cell(**{**cells[0].to_dict(), "dataset": "gap"}), status="failed"),
    ]
    for record in records:
        folder = tmp_path / "cells" / record["cell_id"]
        folder.mkdir(parents=True)
        write_record(folder, record)
    results = load_results(tmp_path)
    note = tuning_notes(results, "sine")
    assert note is not None
    assert note.parts[0] == Strong("map (tuned): ")
    text = note.parts[1]
    assert text.startswith(
        "tuned on a 25% validation split of each training set (never the test set) over "
        "noise {learned, 1}, num_steps {100, 400} (4 combinations) by validation log predictive "
        "density, then refitted on the whole training set; chosen: noise learned, num_steps 400 "
        "(2 of 3 cells); noise 1, num_steps 100 (1 of 3 cells)."
    )
    assert "1 of 4 validation fits broke down (scored -inf)" in text
    assert "Tuning took 5.33 s per cell on average" in text
    # A tuned contestant whose cells all failed still states its grid; untuned sets get none.
    gap = tuning_notes(results, "gap")
    assert gap is not None and "no cell finished its tuning" in gap.parts[1]
    assert tuning_notes(results, "nowhere") is None


@pytest.mark.parametrize("method", ["map", "map (tuned)"])
def test_both_contestants_are_rows_of_the_cells_frame(tmp_path: Path, method: str) -> None:
    tune = {"grid": {"noise": [1.0]}, "validation_fraction": 0.2}
    for cell in (
        Cell(suite="t", dataset="sine", split=0, method="map", backend="pyro", seed=0),
        Cell(suite="t", dataset="sine", split=0, method="map", backend="pyro", seed=0, tune=tune),
    ):
        folder = tmp_path / "cells" / cell.cell_id
        folder.mkdir(parents=True)
        write_record(folder, _record(cell))
    cells = load_results(tmp_path).cells
    assert len(cells[cells["method"] == method]) == 1
