"""Reference posteriors through the runner: computed once by the worker, cached by content,
reused by later runs and other suites, published into a suite's results, failures isolated."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
import xarray as xr

from ppl_bnn.bench import process, reference_jobs
from ppl_bnn.bench.cell import base_record, cell_from_dict
from ppl_bnn.bench.process import install
from ppl_bnn.bench.record import read_record, read_records, write_record
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.reference import GATE, ReferenceSettings, read_reference
from tests.bench.conftest import FAST_SVI, tiny_suite

# 4 chains x 60 kept draws in one batch: more than the 200 draws a cell keeps, so the
# reference's own stored_draws shows in its predictions; a floor needs 4 chains.
TINY_REFERENCE = {
    "engine": "nuts", "num_chains": 4, "chains_per_batch": 4, "num_warmup": 30,
    "num_samples": 60, "max_tree_depth": 3,
}  # fmt: skip
# A method of the suite that no dataset runs: the filter leaves out every cell, not the
# references.
NO_CELLS = {"method": {"map"}}
METHODS = {"svi": dict(FAST_SVI), "map": {"num_steps": 5}}


def _files(path: Path) -> set[str]:
    return {p.name for p in path.iterdir()}


def test_reference_is_computed_once_then_reused_and_published(
    tmp_path: Path, jax_cache: str
) -> None:
    cache = tmp_path / "cache"
    datasets = [
        {"name": "sine", "exclude": ["map"]},
        {"name": "gap", "no_reference": "too slow here", "exclude": ["map"]},
    ]
    suite = tiny_suite(reference=TINY_REFERENCE, datasets=datasets, methods=METHODS)
    first = run_suite(
        suite, tmp_path / "a", jobs=2, only=NO_CELLS, reference_dir=cache, jax_cache=jax_cache
    )
    assert [(o.name, o.source) for o in first.references] == [
        ("sine-split0", "computed"),
        ("gap-split0", "skipped"),
    ]
    assert first.ok and not first.failed_references and not read_records(tmp_path / "a")
    (entry,) = cache.iterdir()
    assert _files(entry) == {
        "record.json", "predictions.nc", "inference_data.nc", "fit.json", "reference.json",
    }  # fmt: skip
    document, record = read_reference(entry), read_record(entry)
    assert document is not None and record is not None
    assert document["key"] == entry.name and document["status"] == record["status"] == "ok"
    defaults = ReferenceSettings(**TINY_REFERENCE).as_dict()
    assert document["settings"] == {**defaults, "timeout_s": 1800.0, "stored_draws": 1000}
    assert record["config"]["reference"]["target_floor"] == defaults["target_floor"]
    # One batch of 4 short chains: a floor, far from the target, and the chains said so.
    found = document["diagnostics"]
    assert found["chains_run"] == 4 and found["chains_kept"] >= GATE["min_chains"]
    assert found["floor_w2"] == record["metrics"]["floor_w2"] > 0
    assert found["floor_w2_random"] > 0 and found["rhat_across"] > 0
    assert document["passed"] is True and document["note"] is None
    stopped = json.loads((entry / "fit.json").read_text())["info"]["stopped"]
    assert stopped == "ran 4 of at most 4 chains"
    assert record["config"]["stored_draws"] == 1000
    with xr.open_dataset(entry / "predictions.nc") as preds:
        assert preds["test_f"].sizes["draw"] == 4 * 60
        assert preds["fidelity_f"].sizes["fidelity_draw"] == 4 * 60

    published = tmp_path / "a" / "references" / "sine-split0"
    assert _files(published) == {"reference.json", "record.json", "predictions.nc"}
    assert read_reference(published) == document
    infeasible = read_reference(tmp_path / "a" / "references" / "gap-split0")
    assert infeasible is not None and infeasible["status"] == "infeasible"
    assert infeasible["note"] == "too slow here" and infeasible["passed"] is None
    suite_file = json.loads((tmp_path / "a" / "suite.json").read_text())
    assert suite_file["reference"] == document["settings"]

    # Another suite with the same model, data and settings: the same key, no new process.
    other = tiny_suite(
        name="other", timeout_s=30, reference=TINY_REFERENCE, datasets=datasets, methods=METHODS
    )
    again = run_suite(other, tmp_path / "b", jobs=2, only=NO_CELLS, reference_dir=cache)
    assert [o.source for o in again.references] == ["cached", "skipped"]
    assert read_reference(entry) == document and read_record(entry) == record
    assert read_reference(tmp_path / "b" / "references" / "sine-split0") == document

    skipped = run_suite(suite, tmp_path / "c", only=NO_CELLS, references=False, reference_dir=cache)
    assert not skipped.references and not (tmp_path / "c" / "references").exists()
    assert json.loads((tmp_path / "c" / "suite.json").read_text())["reference"] is None


def test_failed_reference_does_not_stop_the_sweep_and_is_retried(
    tmp_path: Path, jax_cache: str
) -> None:
    cache = tmp_path / "cache"
    # The reference is killed half a second in, while still importing: it never compiles.
    suite = tiny_suite(reference={**TINY_REFERENCE, "timeout_s": 0.5})
    summary = run_suite(suite, tmp_path / "r", jobs=2, reference_dir=cache, jax_cache=jax_cache)
    assert summary.ok and summary.failed_references == ["sine-split0"]
    assert [r["status"] for r in read_records(tmp_path / "r")] == ["ok"]
    published = read_reference(tmp_path / "r" / "references" / "sine-split0")
    assert published is not None and published["status"] == "timeout"
    assert published["passed"] is None and "exceeded its 0.5 s limit" in published["note"]
    assert published["attempt"] == 1

    kept = run_suite(suite, tmp_path / "r", jobs=2, reference_dir=cache, retry=False)
    assert kept.skipped == 1 and [o.source for o in kept.references] == ["cached"]
    assert kept.references[0].document == published
    retried = run_suite(suite, tmp_path / "r", jobs=2, reference_dir=cache, jax_cache=jax_cache)
    assert [o.source for o in retried.references] == ["computed"]
    again = retried.references[0].document
    assert again["attempt"] == 2 and again["computed_at"] >= published["computed_at"]


def _fake_process(order: list[str], metrics: dict[str, float]) -> Any:
    """Stands in for the worker process: writes a record, calls ``before_install``, installs."""

    def run(cell_dict: dict, out_dir: str, *, before_install=None, **_: Any) -> dict:
        cell = cell_from_dict(cell_dict)
        order.append(cell.method)
        final = Path(out_dir)
        staging = final.with_name(f".{final.name}.staging")
        staging.mkdir(parents=True)
        record = {**base_record(cell), "status": "ok", "metrics": metrics, "finished_at": "t"}
        write_record(staging, record)
        for name in ("predictions.nc", "inference_data.nc"):
            (staging / name).write_text(name)
        if before_install is not None:
            before_install(staging, read_record(staging))
        install(staging, final)
        return record

    return run


def test_references_are_submitted_before_the_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    passing = {"chains_run": 4.0, "chains_kept": 4.0, "floor_w2": 0.01}
    fake = _fake_process(order, passing)
    monkeypatch.setattr(reference_jobs, "run_cell_process", fake)  # references
    monkeypatch.setattr(process, "run_cell_process", fake)  # cells, by run_cells_process
    suite = tiny_suite(reference=TINY_REFERENCE, datasets=[{"name": "sine"}, {"name": "gap"}],
                       methods={"svi": FAST_SVI, "map": {"num_steps": 5}})  # fmt: skip
    summary = run_suite(suite, tmp_path / "r", jobs=1, reference_dir=tmp_path / "cache")
    assert order == ["nuts", "nuts", "svi", "map", "svi", "map"]
    assert [o.document["passed"] for o in summary.references] == [True, True]
    published = tmp_path / "r" / "references" / "gap-split0"
    assert (published / "predictions.nc").read_text() == "predictions.nc"
    assert not (published / "inference_data.nc").exists()
    (entry,) = (p for p in (tmp_path / "cache").iterdir() if (p / "record.json").is_file()
                and read_record(p)["config"]["dataset"] == "gap")  # fmt: skip
    for folder in (published, entry):  # readable by all: a cache shared with other users
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755
        assert stat.S_IMODE((folder / "record.json").stat().st_mode) == 0o644
