"""The statement of how a tuned contestant was tuned, read from its records: with successive
halving, it says so."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd

from ppl_bnn.report.tuning import tuning_notes


def _results(tune: dict[str, Any]) -> Any:
    record = {
        "config": {"tune": tune},
        "info": {"tuning": {"chosen": {"noise": 0.5}, "seconds": 2.0, "scores": [
            {"status": "ok"}, {"status": "ok"}, {"status": "diverged"},
        ]}},
    }  # fmt: skip
    cells = pd.DataFrame([{"cell_id": "a", "dataset": "sine", "method": "map (tuned)"}])
    return SimpleNamespace(cells=cells, record=lambda cell_id: record)


def _text(note: Any) -> str:
    return "".join(part if isinstance(part, str) else part.text for part in note.parts)


def test_a_grid_searched_by_successive_halving_says_so() -> None:
    grid = {"grid": {"noise": [0.5, 1.0, 2.0]}, "validation_fraction": 0.2}
    plain = _text(tuning_notes(_results(grid), "sine"))
    halved = _text(tuning_notes(_results({**grid, "halving": 3}), "sine"))
    assert "successive halving" not in plain
    assert (
        "by validation log predictive density, searched by successive halving (the best 1 in 3 "
        "of each rung goes on at 3 times the steps; the last rung at 1/3 of the method's), then "
        "refitted on the whole training set; chosen: noise 0.5."
    ) in halved
    assert "1 of 3 validation fits broke down" in halved
