"""``Comparison`` read from a results folder, without running one: what it refuses, and what
its verdict says of a reference posterior: one that failed, a chain ensemble with a floor, and
one without a floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppl_bnn import Comparison
from ppl_bnn.bench.record import PREDICTIONS_FILE, RECORD_FILE
from ppl_bnn.comparison import Verdict
from ppl_bnn.reference import reference_document
from ppl_bnn.report.recommend import FIDELITY_WHY, Basis, Grade, Recommendation, Standing
from ppl_bnn.report.reference_entries import REFERENCE_RETRY, ReferenceEntry
from ppl_bnn.report.summary import Point
from tests.report.unfinished_records import CRASH, write_failed, write_ranked


def test_a_missing_path_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"results folder .*nowhere does not exist"):
        Comparison(tmp_path / "nowhere")


def test_a_file_is_refused_as_not_a_results_folder(tmp_path: Path) -> None:
    path = tmp_path / "index.html"
    path.write_text("<html></html>")
    with pytest.raises(NotADirectoryError, match=r"index\.html is a file, not a results folder"):
        Comparison(path)


@pytest.mark.parametrize("inside", [None, "cells", "cells/d-split0-map-numpyro-seed0"])
def test_a_folder_without_cells_is_refused(tmp_path: Path, inside: str | None) -> None:
    if inside is not None:
        (tmp_path / inside).mkdir(parents=True)
    with pytest.raises(ValueError, match="holds no cells of a comparison") as refused:
        Comparison(tmp_path)
    assert str(tmp_path) in str(refused.value) and "ppl-bnn compare" in str(refused.value)


def test_a_folder_with_a_cell_record_is_a_comparison(tmp_path: Path) -> None:
    root = write_failed(tmp_path / "results")
    assert any(root.glob(f"cells/*/{RECORD_FILE}"))
    comparison = Comparison(root)
    assert comparison.dataset == "d"
    assert set(comparison.table["status"]) == {"failed", "timeout"}
    text = str(comparison.summary)
    assert "Front: none (no contestant could be ranked)." in text


def test_the_verdict_names_a_failed_reference_its_cause_and_the_remedy(tmp_path: Path) -> None:
    note = f"{CRASH}\nsecond line"
    root = write_ranked(tmp_path / "results", {"status": "failed", "note": note})
    verdict = Comparison(root).summary
    line = (
        f"The reference failed (split 0: {CRASH}): ranked on held-out test log-likelihood and "
        f"cost; {REFERENCE_RETRY}."
    )
    assert verdict.reference_line() == line
    assert line in verdict.lines() and line in str(verdict)
    assert (
        f"Ranked on held-out test log-likelihood: the reference failed (split 0: {CRASH})"
        in (verdict.lines()[0])
    )
    assert "No reference" not in str(verdict) and "second line" not in str(verdict)
    assert verdict.closest is None


@pytest.mark.parametrize(
    ("reference", "line"),
    [
        (
            {"status": "infeasible", "note": "too many weights"},
            "No reference posterior (too many weights): ranked on held-out test log-likelihood "
            "and cost.",
        ),
        (None, "No reference posterior: ranked on held-out test log-likelihood and cost."),
    ],
    ids=["infeasible", "none"],
)
def test_the_verdict_without_a_reference_on_purpose_keeps_its_wording(
    tmp_path: Path, reference: dict | None, line: str
) -> None:
    verdict = Comparison(write_ranked(tmp_path / "results", reference)).summary
    assert verdict.reference_line() == line
    assert "failed" not in str(verdict) and "retry" not in str(verdict)


def _entry(folder: Path, split: int, status: str, note: str | None = None) -> ReferenceEntry:
    passed = True if status == "ok" else None
    return ReferenceEntry(
        dataset="d", split=split, status=status, passed=passed, note=note,
        gate={"min_chains": 4}, diagnostics=dict(FLOOR), settings=dict(MCLMC), wall_s=430.0,
        folder=folder, info=dict(INFO),
    )  # fmt: skip


#: A chain ensemble of 64 MCLMC chains, two of them dropped as frozen, and its floor.
MCLMC = {"engine": "mclmc", "num_chains": 64, "num_warmup": 2000, "num_samples": 500}
FLOOR = {
    "chains_run": 64, "chains_kept": 62, "floor_w2": 0.041, "floor_w2_std": 0.0098,
    "floor_w2_random": 0.03, "floor_w2_std_random": 0.007, "rhat_across": 1.27,
}  # fmt: skip
INFO = {
    "stopped": "reached the target floor",
    "sampling_seconds": 412.0,
    "dropped": {"7": "frozen: step size 0 (median 0.01)", "40": "frozen: step size nan"},
}
#: What the verdict says of it.
PASSED = (
    "Reference posterior: a chain ensemble of 64 MCLMC chains from deep-ensemble starts (62 "
    "kept; 2 dropped, frozen), floor W2 0.041 (0.0098 standardised), sampled in 412 s (reached "
    "the target floor); across-chain R-hat 1.27 measures how multimodal the posterior is, not "
    "convergence."
)


def test_the_verdict_names_a_split_whose_reference_timed_out_beside_one_with_a_floor(
    tmp_path: Path,
) -> None:
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    timeout = "Timeout: the cell exceeded its 1800 s limit and was killed"
    entries = (_entry(tmp_path, 0, "ok"), _entry(tmp_path, 1, "timeout", timeout))
    basis = Basis("ref_w2", "W2 to ref.", True, FIDELITY_WHY)
    top = Standing(("nuts", "numpyro"), Grade.TRUST, value=0.1, se=0.01, cost=2.0)
    verdict = Verdict("d", Recommendation("d", basis, (top,)), entries, True, ())
    assert verdict.reference_line() == (
        f"{PASSED} The reference timed out (split 1: {timeout}); {REFERENCE_RETRY}."
    )
    assert verdict.closest == "nuts/numpyro"


def test_the_verdict_describes_the_chain_ensemble_and_its_floor(tmp_path: Path) -> None:
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    entry = _entry(tmp_path, 0, "ok")
    basis = Basis("ref_w2", "W2 to ref.", True, FIDELITY_WHY)
    top = Standing(("nuts", "numpyro"), Grade.TRUST, value=0.03, se=0.01, cost=2.0,
                   floor_ratio=0.7)  # fmt: skip
    verdict = Verdict("d", Recommendation("d", basis, (top,)), (entry,), True, ())
    assert verdict.reference_passed and verdict.reference_line() == PASSED
    assert verdict.lines()[0] == (
        "d: Trust nuts/numpyro (W2 to ref. 0.030 \u00b1 0.010, indistinguishable from the "
        "reference). None is shown as good as the reference (within 1.25\u00d7 its floor); the "
        f"closest, nuts/numpyro, is 0.70\u00d7 the floor. Ranked on {FIDELITY_WHY}."
    )
    assert "Closest to the reference: nuts/numpyro." in str(verdict)


def test_the_verdicts_repr_is_its_text_and_each_front_number_carries_its_label(
    tmp_path: Path,
) -> None:
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    basis = Basis("test_ll", "test LL", False, "held-out test log-likelihood")
    top = Standing(("map", "numpyro"), Grade.TRUST, value=1.12, se=0.01, cost=1.83)
    front = (Point(("map", "numpyro"), 1.83, 0.1, 0.5, 1.12, 0.01, True),)
    verdict = Verdict("d", Recommendation("d", basis, (top,)), (), False, front)
    assert repr(verdict) == str(verdict)
    assert "Front (cost against test LL, cheapest first): map/numpyro 1.83 s, test LL 1.12." in (
        repr(verdict)
    )


def test_the_verdict_of_a_reference_without_a_floor_says_why_and_what_to_try(
    tmp_path: Path,
) -> None:
    """3 of 16 chains kept: the gate of :func:`ppl_bnn.reference.reference_document` refuses a
    floor, and the verdict says so, ranks on test LL and names no closest contestant."""
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    found = {"chains_run": 16, "chains_kept": 3, "rhat_across": 1.4}
    document = reference_document(
        "d", 0, settings={**MCLMC, "num_chains": 16}, model={}, computed_at="2025-01-01",
        record={"status": "ok", "metrics": found},
    )  # fmt: skip
    assert document["passed"] is False
    entry = ReferenceEntry(
        dataset="d", split=0, status="ok", passed=document["passed"], note=document["note"],
        gate=document["gate"], diagnostics=document["diagnostics"],
        settings=document["settings"], wall_s=None, folder=tmp_path,
    )  # fmt: skip
    basis = Basis("test_ll", "test LL", False, "held-out test log-likelihood")
    top = Standing(("nuts", "numpyro"), Grade.TRUST, value=-1.0, se=0.1, cost=2.0)
    verdict = Verdict("d", Recommendation("d", basis, (top,)), (entry,), False, ())
    assert verdict.reference_line() == (
        "Not ranked: reference has no floor (3 of 16 chains kept, fewer than the 4 a floor "
        "needs); ranked on held-out test log-likelihood instead. Try more chains (num_chains, "
        "now 16) or a longer warm-up (num_warmup, now 2000)."
    )
    assert verdict.closest is None and "Closest" not in str(verdict)
