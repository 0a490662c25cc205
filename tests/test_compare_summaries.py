"""``benchmarks/compare_summaries.py``: two runs' decisions set side by side, a contradiction
(as good in one run, worse in the other) and a change of trusted contestant named."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "compare_summaries", ROOT / "benchmarks" / "compare_summaries.py"
)
compare_summaries = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_summaries)


def _summary(path: Path, grades: dict[str, str]) -> Path:
    standings = [
        {"method": m, "backend": "numpyro", "grade": g, "value": 1.0, "se": 0.1}
        for m, g in grades.items()
    ]
    entry = {"dataset": "sine", "basis": "ref_w2", "sentence": "", "standings": standings}
    path.write_text(json.dumps({"suite": "default", "datasets": [entry]}))
    return path


def test_a_contestant_as_good_in_one_run_and_worse_in_the_other_is_named(tmp_path: Path) -> None:
    before = _summary(tmp_path / "a.json", {"nuts": "trust", "hmc": "as good", "svi": "worse"})
    after = _summary(tmp_path / "b.json", {"nuts": "trust", "hmc": "worse", "svi": "undecided"})
    text = compare_summaries.compare(before, after)
    assert "worse in the other: hmc/numpyro\n" in text
    assert "The trusted contestant is the same on 1 of 1 datasets." in text


def test_a_changed_trusted_contestant_is_counted(tmp_path: Path) -> None:
    before = _summary(tmp_path / "a.json", {"nuts": "trust", "hmc": "as good"})
    after = _summary(tmp_path / "b.json", {"nuts": "as good", "hmc": "trust"})
    text = compare_summaries.compare(before, after)
    assert "trusted nuts/numpyro before, hmc/numpyro after" in text
    assert "worse in the other: none" in text
    assert "The trusted contestant is the same on 0 of 1 datasets." in text
