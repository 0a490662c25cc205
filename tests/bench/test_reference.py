"""Reference posteriors without running one: cache key, data fingerprint, cache root, the
convergence gate, reference.json, and which cached entries are reused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from ppl_bnn.bench.record import MAX_ATTEMPTS
from ppl_bnn.bench.runner import plan_references
from ppl_bnn.data import load_dataset
from ppl_bnn.reference import (
    GATE,
    cache_root,
    data_fingerprint,
    describe_reference,
    is_converged,
    read_reference,
    reference_document,
    reference_key,
    write_reference,
)
from ppl_bnn.versions import library_versions
from tests.bench.conftest import tiny_suite, write_netcdf

TINY_REFERENCE = {"num_chains": 2, "num_warmup": 30, "num_samples": 30, "max_tree_depth": 3}
PASSING = {"rhat_max": GATE["rhat_max"], "ess_bulk_min": GATE["ess_bulk_min"]}


def _job(**reference: object):
    suite = tiny_suite(reference={**TINY_REFERENCE, **reference})
    (job,) = suite.references()
    return job


def _key(job, data=None) -> str:
    cell = job.cell
    data = data or load_dataset(cell.dataset, split=cell.split, **cell.data)
    return reference_key(cell.config(), data_fingerprint(data))


def test_key_is_stable_and_independent_of_the_suite() -> None:
    job = _job()
    same = tiny_suite(name="other", timeout_s=5, reference=dict(TINY_REFERENCE)).references()[0]
    assert _key(job) == _key(job) == _key(same)
    # Key order in the config does not matter: the JSON is canonical.
    config = job.cell.config()
    fingerprint = data_fingerprint(load_dataset("sine"))
    shuffled = dict(reversed(list(config.items())))
    assert reference_key(shuffled, fingerprint) == reference_key(config, fingerprint)


def test_key_changes_with_data_model_settings_and_versions() -> None:
    job = _job()
    base = _key(job)
    data = load_dataset("sine")
    changed = dataclasses.replace(data, y_train=data.y_train + 1e-9)
    assert _key(job, changed) != base
    assert _key(dataclasses.replace(job, cell=dataclasses.replace(job.cell, split=1))) != base
    model = tiny_suite(model={"hidden": [5]}, reference=TINY_REFERENCE).references()[0]
    assert _key(model) != base
    for setting in ({"num_samples": 31}, {"max_tree_depth": 4}, {"seed": 1},
                    {"target_accept": 0.9}):  # fmt: skip
        assert _key(_job(**setting)) != base, setting
    limited = tiny_suite(datasets=[{"name": "sine", "max_train": 20}], reference=TINY_REFERENCE)
    assert _key(limited.references()[0]) != base
    fingerprint = data_fingerprint(data)
    for name in ("numpyro", "jax", "jaxlib"):
        versions = {**library_versions(), name: "0.0.1"}
        assert reference_key(job.cell.config(), fingerprint, versions) != base, name
    # Versions of libraries a NumPyro reference does not run on are not part of the key.
    versions = {**library_versions(), "torch": "0.0.1"}
    assert reference_key(job.cell.config(), fingerprint, versions) == base


def test_timeout_is_not_part_of_the_key() -> None:
    assert _key(_job(timeout_s=10)) == _key(_job())


def test_cache_root_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("PPL_BNN_REFERENCE_DIR", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "ppl_bnn" / "references"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "ppl_bnn" / "references"
    monkeypatch.setenv("PPL_BNN_REFERENCE_DIR", "")  # empty: unset
    assert cache_root() == tmp_path / "xdg" / "ppl_bnn" / "references"
    monkeypatch.setenv("PPL_BNN_REFERENCE_DIR", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(tmp_path / "flag") == tmp_path / "flag"
    assert cache_root("~/refs") == tmp_path / "home" / "refs"


@pytest.mark.parametrize(
    ("status", "diagnostics", "expected"),
    [
        ("ok", PASSING, True),
        ("ok", {**PASSING, "rhat_max": 1.011}, False),
        ("ok", {**PASSING, "ess_bulk_min": 399.9}, False),
        ("ok", {**PASSING, "rhat_max": math.nan}, False),
        ("ok", {**PASSING, "rhat_max": math.inf}, False),
        ("ok", {"rhat_max": 1.0}, False),
        ("ok", {}, False),
        ("diverged", PASSING, False),
        ("failed", PASSING, None),
        ("timeout", {}, None),
        ("infeasible", {}, None),
    ],
)
def test_gate(status: str, diagnostics: dict, expected: bool | None) -> None:
    assert is_converged(status, diagnostics) is expected


def _record(status: str = "ok", **metrics: float) -> dict:
    return {
        "status": status,
        "config": {"dataset": "sine", "split": 0, "model": {"hidden": [4]}},
        "metrics": {"rhat_median": 1.0, "divergences": 2.0, **metrics},
        "error": None,
        "timings": {"sampling": 3.0, "cell_wall": 12.5},
        "versions": {"numpyro": "0.22.0"},
        "finished_at": "2026-01-01T00:00:00+00:00",
    }


def test_reference_document_from_a_record(tmp_path: Path) -> None:
    settings = {"num_chains": 4, "seed": 0}
    common = {"settings": settings, "model": {"hidden": [4]}, "computed_at": "now", "key": "k"}
    good = reference_document("sine", 0, record=_record(**PASSING), **common)
    assert good["converged"] is True and good["note"] is None
    assert good["diagnostics"]["divergences"] == 2.0 and good["wall_s"] == 12.5
    assert good["computed_at"] == "2026-01-01T00:00:00+00:00" and good["settings"] == settings
    assert good["gate"] == {"rhat_max": 1.01, "ess_bulk_min": 400}
    assert describe_reference(good) == "ok; R-hat max 1.010, bulk ESS min 400; converged"

    bad = reference_document(
        "sine", 0, record=_record(rhat_max=math.nan, ess_bulk_min=50), **common
    )
    assert bad["converged"] is False and bad["diagnostics"]["rhat_max"] is None
    assert bad["note"] == "not converged: R-hat max missing > 1.01; bulk ESS min 50 < 400"
    assert describe_reference(bad).endswith("not converged")

    crashed = {
        **_record("timeout"),
        "metrics": {},
        "error": {"type": "Timeout", "message": "killed"},
    }
    timeout = reference_document("sine", 0, record=crashed, **common)
    assert timeout["converged"] is None and timeout["note"] == "Timeout: killed"

    write_reference(tmp_path, bad)
    assert read_reference(tmp_path) == bad
    (tmp_path / "reference.json").write_text('{"format": 99}')
    assert read_reference(tmp_path) is None
    assert read_reference(tmp_path / "missing") is None
    with pytest.raises(ValueError, match="needs a record or a status"):
        reference_document("sine", 0, settings={}, model={}, computed_at="now")


def test_cached_failures_are_retried_until_they_have_had_their_runs(tmp_path: Path) -> None:
    job = _job()
    key = _key(job)
    todo, done = plan_references([job], tmp_path)
    assert [p.key for p in todo] == [key] and not done
    for status, kept in (("ok", True), ("diverged", True), ("failed", False), ("timeout", False)):
        common = {"settings": {}, "model": {}, "computed_at": "then", "key": key}
        document = reference_document("sine", 0, status=status, **common)
        assert document["attempt"] == 1
        write_reference(tmp_path / key, document)
        write_netcdf(tmp_path / key / "predictions.nc")
        todo, done = plan_references([job], tmp_path, retry=False)
        assert not todo and [(o.source, o.document["status"]) for o in done] == [("cached", status)]
        todo, done = plan_references([job], tmp_path)
        assert (not todo) is kept, status
        # One that has had its runs is kept, unless asked for another.
        write_reference(tmp_path / key, {**document, "attempt": MAX_ATTEMPTS})
        assert not plan_references([job], tmp_path)[0]
        todo, done = plan_references([job], tmp_path, retry=False, rerun_failed=True)
        assert (not todo) is kept, status


def test_unloadable_data_and_no_reference(tmp_path: Path, empty_data_dir: Path) -> None:
    suite = tiny_suite(
        reference=TINY_REFERENCE,
        datasets=[{"name": "bostonHousing"}, {"name": "gap", "no_reference": "too slow"}],
    )
    todo, done = plan_references(suite.references(), tmp_path, data_dir=str(empty_data_dir))
    assert not todo
    missing, infeasible = (o.document for o in done)
    assert [o.source for o in done] == ["unavailable", "skipped"]
    assert missing["status"] == "failed" and missing["key"] is None
    assert "DatasetNotFoundError" in missing["note"] and missing["converged"] is None
    assert infeasible["status"] == "infeasible" and infeasible["note"] == "too slow"
    assert infeasible["converged"] is None and infeasible["key"] is None
    assert infeasible["settings"]["num_chains"] == 2 and infeasible["model"] == {"hidden": [4]}


def test_a_damaged_cached_reference_is_computed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = _job()
    key = _key(job)
    common = {"settings": {}, "model": {}, "computed_at": "then", "key": key}
    write_reference(tmp_path / key, reference_document("sine", 0, status="ok", **common))
    predictions = write_netcdf(tmp_path / key / "predictions.nc")
    todo, done = plan_references([job], tmp_path)
    assert not todo and [o.source for o in done] == ["cached"]
    write_netcdf(predictions, truncate=True)
    todo, done = plan_references([job], tmp_path)
    assert [p.key for p in todo] == [key] and not done
    assert "predictions.nc is unreadable" in caplog.text and "computing it again" in caplog.text
    predictions.unlink()
    todo, _ = plan_references([job], tmp_path)
    assert [p.key for p in todo] == [key]
