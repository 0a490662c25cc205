"""The statement under a dataset's table of how its tuned contestants were tuned: the grid, the
validation split and the settings chosen, read from the stored records (``config["tune"]`` and
``info["tuning"]``, see :mod:`ppl_bnn.bench.tuning`), never typed by hand."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ppl_bnn.report import fmt
from ppl_bnn.report.document import Inline, Paragraph, Strong
from ppl_bnn.report.load import SuiteResults, method_key


def _value(value: Any) -> str:
    """A grid value: a number in short form, or a word (``learned``) as it is."""
    return value if isinstance(value, str) else format(value, "g")


def _values(values: Any) -> str:
    return "{" + ", ".join(_value(v) for v in values) + "}"


def _settings(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {_value(v)}" for k, v in settings.items())


def _statement(contestant: str, records: list[dict[str, Any]]) -> list[Inline]:
    """One contestant's grid, split, choices (with their counts) and tuning time."""
    tune = records[0]["config"]["tune"]
    grid = tune.get("grid") or {}
    fraction = float(tune.get("validation_fraction", 0.2))
    combinations = 1
    for values in grid.values():
        combinations *= len(values)
    tunings = [
        (r.get("info") or {}).get("tuning")
        for r in records
        if isinstance((r.get("info") or {}).get("tuning"), Mapping)
    ]
    text = (
        f"tuned on a {fmt.number(100 * fraction)}% validation split of each training set "
        "(never the test set) over "
        + ", ".join(f"{k} {_values(v)}" for k, v in grid.items())
        + f" ({combinations} combination{'s' if combinations != 1 else ''}) by validation "
        "log predictive density, then refitted on the whole training set"
    )
    if not tunings:
        return [Strong(f"{contestant}: "), text + "; no cell finished its tuning. "]
    chosen = Counter(_settings(t.get("chosen") or {}) for t in tunings)
    picks = "; ".join(
        f"{setting} ({count} of {len(tunings)} cells)"
        if len(chosen) > 1 or len(tunings) > 1
        else setting
        for setting, count in chosen.most_common()
    )
    broken = sum(1 for t in tunings for s in t.get("scores") or [] if s.get("status") != "ok")
    fits = sum(len(t.get("scores") or []) for t in tunings)
    seconds = [float(t["seconds"]) for t in tunings if isinstance(t.get("seconds"), int | float)]
    text += f"; chosen: {picks}."
    if broken:
        text += f" {broken} of {fits} validation fits broke down (scored -inf)."
    if seconds:
        text += (
            f" Tuning took {fmt.number(sum(seconds) / len(seconds))} s per cell on average, "
            "shown apart from the fit's time (tuning s)."
        )
    return [Strong(f"{contestant}: "), text + " "]


def tuning_notes(results: SuiteResults, dataset: str) -> Paragraph | None:
    """Under a dataset's table: for each tuned contestant (``map (tuned)``), how its settings
    were chosen and which were chosen; None when nothing is tuned here."""
    cells = results.cells
    if cells.empty:
        return None
    by_contestant: dict[str, list[dict[str, Any]]] = {}
    for _, row in cells[cells["dataset"] == dataset].iterrows():
        record = results.record(row["cell_id"])
        if (record.get("config") or {}).get("tune") is not None:
            by_contestant.setdefault(str(row["method"]), []).append(record)
    if not by_contestant:
        return None
    parts: list[Inline] = []
    for contestant in sorted(by_contestant, key=method_key):
        parts += _statement(contestant, by_contestant[contestant])
    return Paragraph(tuple(parts))
