"""``benchmarks/compare_overhead.py``: a comparison's time split into its fits, its reference and
what ``compare`` adds, and the mean share over repeated runs."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "compare_overhead", ROOT / "benchmarks" / "compare_overhead.py"
)
compare_overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_overhead)


def _results(folder: Path, cells: list[tuple[float, float]], reference_s: float) -> Path:
    """A results folder: cells of (wall, seconds outside fit), one computed reference."""
    for i, (wall, outside) in enumerate(cells):
        cell = folder / "cells" / f"cell{i}"
        cell.mkdir(parents=True)
        timings = {"cell_wall": wall, "overhead": outside, "total": wall - outside - 0.5}
        (cell / "record.json").write_text(json.dumps({"timings": timings}))
    reference = folder / "references" / "ref"
    reference.mkdir(parents=True)
    (reference / "reference.json").write_text(json.dumps({"wall_s": reference_s}))
    run = {"wall_s": 100.0, "references_computed": 1}
    (folder / "suite.json").write_text(json.dumps({"runs": [{"wall_s": 1.0}, run]}))
    return folder


def test_the_overhead_is_the_time_outside_the_fits_and_the_reference(tmp_path):
    found = compare_overhead.overhead(_results(tmp_path, [(20.0, 2.0), (30.0, 3.0)], 40.0))
    assert found["fitting_s"] == pytest.approx(45.0)
    assert found["in_cells_s"] == pytest.approx(5.0)
    assert found["runner_s"] == pytest.approx(100.0 - 50.0 - 40.0)  # the last run's wall time
    assert found["fit_calls_s"] == pytest.approx(44.0)
    assert found["overhead_share"] == pytest.approx((5.0 + 10.0) / (45.0 + 40.0))


def test_repeated_runs_give_the_mean_share_and_its_standard_error():
    runs = [{"overhead_share": s, "sweep_s": 90.0 + i} for i, s in enumerate((0.09, 0.10, 0.11))]
    found = compare_overhead.summary(runs)
    assert found["shares"] == [0.09, 0.10, 0.11]
    assert found["share_mean"] == pytest.approx(0.10)
    assert found["share_se"] == pytest.approx(0.01 / math.sqrt(3))
    assert found["mean_seconds"] == {"sweep_s": pytest.approx(91.0)}
    assert math.isnan(compare_overhead.mean_and_standard_error([0.1])[1])


def test_the_committed_measurement_renders_its_runs_and_mean():
    record = json.loads(compare_overhead.RECORD.read_text())
    text = compare_overhead.markdown(record)
    assert f"{record['share_mean']:.1%} ± {record['share_se']:.1%}" in text
    assert record["readme_command"] in text and record["commit"] in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(record["runs"]) == len(record["shares"])
    assert compare_overhead.summary(record["runs"])["share_mean"] == record["share_mean"]
