"""``Comparison`` read from a results folder, without running one: what it refuses, and what
its verdict says of a reference posterior that failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppl_bnn import Comparison
from ppl_bnn.bench.record import PREDICTIONS_FILE, RECORD_FILE
from ppl_bnn.comparison import Verdict
from ppl_bnn.report.load import REFERENCE_RETRY, ReferenceEntry
from ppl_bnn.report.recommend import Basis, Grade, Recommendation, Standing
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
    converged = True if status == "ok" else None
    return ReferenceEntry(
        dataset="d", split=split, status=status, converged=converged, note=note,
        gate={"rhat_max": 1.01, "ess_bulk_min": 400}, diagnostics={}, settings={}, wall_s=1.0,
        folder=folder,
    )  # fmt: skip


def test_the_verdict_names_a_split_whose_reference_timed_out_beside_a_converged_one(
    tmp_path: Path,
) -> None:
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    timeout = "Timeout: the cell exceeded its 1800 s limit and was killed"
    entries = (_entry(tmp_path, 0, "ok"), _entry(tmp_path, 1, "timeout", timeout))
    basis = Basis("ref_w2", "W2 to ref.", True, "fidelity to a converged reference")
    top = Standing(("nuts", "numpyro"), Grade.TRUST, value=0.1, se=0.01, cost=2.0)
    verdict = Verdict("d", Recommendation("d", basis, (top,)), entries, True, ())
    assert verdict.reference_line() == (
        "Reference posterior: converged on 1 of 1 split(s). The reference timed out (split 1: "
        f"{timeout}); {REFERENCE_RETRY}."
    )
    assert verdict.closest == "nuts/numpyro"
