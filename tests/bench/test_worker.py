"""The worker's cell loop, run in this process: what a cell's record keeps of its run."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from ppl_bnn.bench import worker
from ppl_bnn.bench.record import RECORD_FILE
from tests.bench.conftest import tiny_suite


def test_warnings_logged_during_a_cell_are_kept_in_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fit = worker.fit

    def fit_with_a_fallback(*args: Any, **kwargs: Any) -> Any:
        logging.getLogger("ppl_bnn.backends.pyro.potential").warning("compiling failed (%s)", "x")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(worker, "fit", fit_with_a_fallback)
    (cell,) = tiny_suite(backends=["pyro"], seeds=[0]).cells()
    with worker.logged_warnings() as warnings:
        record = worker.run(cell, tmp_path, data_dir=None, threads=1, warnings=warnings)
    assert record["status"] == "ok", record["error"]
    expected = ["WARNING ppl_bnn.backends.pyro.potential: compiling failed (x)"]
    assert record["warnings"] == expected
    assert json.loads((tmp_path / RECORD_FILE).read_text())["warnings"] == expected
    # Outside the block nothing is collected any more.
    logging.getLogger("elsewhere").warning("later")
    assert warnings == expected


def test_a_record_without_warnings_has_no_warnings_entry_and_the_list_is_capped(
    tmp_path: Path,
) -> None:
    (cell,) = tiny_suite(backends=["pyro"], seeds=[0]).cells()
    with worker.logged_warnings() as warnings:
        record = worker.run(cell, tmp_path, data_dir=None, threads=1, warnings=warnings)
        for k in range(2 * worker.MAX_LOGGED_WARNINGS):
            logging.getLogger("ppl_bnn").error("problem %d", k)
    assert "warnings" not in record
    assert len(warnings) == worker.MAX_LOGGED_WARNINGS
    assert warnings[0] == "ERROR ppl_bnn: problem 0"
