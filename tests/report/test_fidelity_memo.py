"""A render keeps each cell's distances to its reference; the next computes only what changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import pandas as pd
import pytest

from ppl_bnn.report import fidelity, load_results, memo

CHANGED = "sine-split0-map-numpyro-seed0"


@pytest.fixture
def folder(results_dir: Path, tmp_path: Path) -> Path:
    """A copy of the tiny suite's results, without a memo."""
    copy = tmp_path / "results"
    shutil.copytree(results_dir, copy, ignore=shutil.ignore_patterns("report-cache"))
    return copy


def _frame(folder: Path) -> pd.DataFrame:
    return fidelity.fidelity_frame(load_results(folder)).set_index("cell_id")


def _computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cells whose distances are computed from here on."""
    computed: list[str] = []
    compute = fidelity._distances

    def counting(results, cell_id, *args):
        computed.append(cell_id)
        return compute(results, cell_id, *args)

    monkeypatch.setattr(fidelity, "_distances", counting)
    return computed


def test_a_second_render_reads_every_distance_from_the_memo(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    computed = _computed(monkeypatch)
    first = _frame(folder)
    assert len(computed) == len(first) > 0
    assert (folder / fidelity.MEMO_FILE).is_file()
    computed.clear()
    second = _frame(folder)
    assert computed == []
    pd.testing.assert_frame_equal(first, second)


def test_a_cell_whose_predictions_changed_is_computed_again_alone(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _frame(folder)
    with h5py.File(folder / "cells" / CHANGED / "predictions.nc", "r+") as handle:
        # The fidelity sample is what W2 is measured on (the test draws only stand in for it
        # in predictions stored before there was one).
        handle["fidelity_f"][...] = handle["fidelity_f"][...] + 1.0
    computed = _computed(monkeypatch)
    second = _frame(folder)
    assert computed == [CHANGED]
    assert second.loc[CHANGED, "ref_w2"] > first.loc[CHANGED, "ref_w2"]
    others = first.index != CHANGED
    pd.testing.assert_frame_equal(first[others], second[others])


def test_a_new_reference_forgets_the_distances_of_its_split(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _frame(folder)
    with h5py.File(folder / "references" / "sine-split0" / "predictions.nc", "r+") as handle:
        handle["test_f"][...] = handle["test_f"][...] * 1.0  # rewritten: a new modification time
    computed = _computed(monkeypatch)
    _frame(folder)
    sine = [c for c in first.index if c.startswith("sine-split0-")]
    assert sorted(computed) == sorted(sine) and sine


@pytest.mark.parametrize(
    "memo",
    ['{"code": "written by other code", "cells": {}}', "not json {", "[1, 2]"],
    ids=["other-code", "corrupt", "not-a-mapping"],
)
def test_a_memo_of_other_code_or_unreadable_is_ignored_and_replaced(
    folder: Path, monkeypatch: pytest.MonkeyPatch, memo: str
) -> None:
    first = _frame(folder)
    path = folder / fidelity.MEMO_FILE
    if memo.startswith('{"code"'):
        stored = json.loads(path.read_text())
        memo = json.dumps({**stored, "code": "written by other code"})
    path.write_text(memo)
    computed = _computed(monkeypatch)
    pd.testing.assert_frame_equal(first, _frame(folder))
    assert len(computed) == len(first)
    assert json.loads(path.read_text())["code"] == fidelity._code_key()


def test_a_folder_that_cannot_be_written_still_gets_its_distances(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(memo, "write_atomic", refuse)
    frame = _frame(folder)
    assert frame["ref_w2"].notna().any()
    assert not (folder / fidelity.MEMO_FILE).exists()
