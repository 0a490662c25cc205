"""Reference posteriors without running one: cache key, data fingerprint, cache root, the gate
(a floor), reference.json, and which cached entries are reused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from ppl_bnn.bench.record import write_record
from ppl_bnn.bench.reference_jobs import plan_references
from ppl_bnn.data import load_dataset
from ppl_bnn.defaults import MAX_ATTEMPTS
from ppl_bnn.reference import (
    GATE,
    cache_root,
    data_fingerprint,
    describe_reference,
    passes_gate,
    read_reference,
    reference_document,
    reference_key,
    write_reference,
)
from ppl_bnn.versions import library_versions
from tests.bench.conftest import tiny_suite, write_netcdf

TINY_REFERENCE = {
    "engine": "nuts", "num_chains": 4, "chains_per_batch": 4, "num_warmup": 30,
    "num_samples": 30, "max_tree_depth": 3,
}  # fmt: skip
PASSING = {"chains_run": 6.0, "chains_kept": float(GATE["min_chains"]), "floor_w2": 0.02}


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
                    {"target_accept": 0.9}, {"target_floor": 0.02}, {"max_seconds": 60},
                    {"num_chains": 8}):  # fmt: skip
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
        ("ok", {**PASSING, "floor_w2": None, "floor_tv": 0.01}, True),
        ("ok", {**PASSING, "chains_kept": 3.0}, False),
        ("ok", {**PASSING, "floor_w2": math.nan}, False),
        ("ok", {**PASSING, "floor_w2": None}, False),
        ("ok", {}, False),
        ("diverged", PASSING, False),
        ("failed", PASSING, None),
        ("timeout", {}, None),
        ("infeasible", {}, None),
    ],
)
def test_gate(status: str, diagnostics: dict, expected: bool | None) -> None:
    assert passes_gate(status, diagnostics) is expected


def _record(status: str = "ok", **metrics: float) -> dict:
    return {
        "status": status,
        "config": {"dataset": "sine", "split": 0, "model": {"hidden": [4]}},
        "metrics": {"rhat_across": 1.3, "divergences": 2.0, **metrics},
        "error": None,
        "timings": {"sampling": 3.0, "cell_wall": 12.5},
        "versions": {"numpyro": "0.22.0"},
        "finished_at": "2026-01-01T00:00:00+00:00",
    }


def test_reference_document_from_a_record(tmp_path: Path) -> None:
    settings = {"num_chains": 4, "seed": 0}
    common = {"settings": settings, "model": {"hidden": [4]}, "computed_at": "now", "key": "k"}
    good = reference_document("sine", 0, record=_record(**PASSING), **common)
    assert good["passed"] is True and good["note"] is None
    assert good["diagnostics"]["divergences"] == 2.0 and good["wall_s"] == 12.5
    assert good["diagnostics"]["rhat_across"] == 1.3  # kept, as how multimodal it is
    assert good["computed_at"] == "2026-01-01T00:00:00+00:00" and good["settings"] == settings
    assert good["gate"] == {"min_chains": 4}
    assert describe_reference(good) == "ok; 4 of 6 chains kept, floor w2 0.02; passed"

    bad = reference_document(
        "sine", 0, record=_record(chains_run=6.0, chains_kept=3.0, floor_w2=math.nan), **common
    )
    assert bad["passed"] is False and bad["diagnostics"]["floor_w2"] is None
    assert bad["note"] == "no floor: 3 of 6 chains kept, fewer than the 4 a floor needs"
    assert describe_reference(bad).endswith("no floor; did not pass")

    crashed = {
        **_record("timeout"),
        "metrics": {},
        "error": {"type": "Timeout", "message": "killed"},
    }
    timeout = reference_document("sine", 0, record=crashed, **common)
    assert timeout["passed"] is None and timeout["note"] == "Timeout: killed"

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
        record = {**_record(status, **PASSING), "cell_id": "ref"}
        document = reference_document("sine", 0, record=record, **common)
        assert document["attempt"] == 1
        write_record(tmp_path / key, record)
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
    assert "DatasetNotFoundError" in missing["note"] and missing["passed"] is None
    assert infeasible["status"] == "infeasible" and infeasible["note"] == "too slow"
    assert infeasible["passed"] is None and infeasible["key"] is None
    assert infeasible["settings"]["num_chains"] == 4 and infeasible["model"] == {"hidden": [4]}


def test_a_damaged_cached_reference_is_computed_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = _job()
    key = _key(job)
    entry = tmp_path / key
    record = {**_record(**PASSING), "config": job.cell.config()}
    common = {"settings": {}, "model": {}, "computed_at": "then", "key": key}
    document = reference_document("sine", 0, record=record, **common)
    write_reference(entry, document)
    write_record(entry, {**record, "cell_id": "ref"})
    predictions = write_netcdf(entry / "predictions.nc")
    todo, done = plan_references([job], tmp_path)
    assert not todo and [o.source for o in done] == ["cached"]
    write_netcdf(predictions, truncate=True)
    todo, done = plan_references([job], tmp_path)
    assert [p.key for p in todo] == [key] and not done
    assert "predictions.nc is unreadable" in caplog.text and "computing it again" in caplog.text
    predictions.unlink()
    todo, _ = plan_references([job], tmp_path)
    assert [p.key for p in todo] == [key]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("key", "names the key 'elsewhere'"),
        ("no record", "record.json is missing or unreadable"),
        ("passed", "gate verdict does not follow from its diagnostics"),
        ("floor", "diagnostics differ from those its record.json records"),
        ("status", "does not record the status 'ok'"),
    ],
)
def test_a_partial_or_altered_cached_reference_is_never_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: str, problem: str
) -> None:
    job = _job()
    key = _key(job)
    entry = tmp_path / key
    record = {**_record(**PASSING), "config": job.cell.config(), "cell_id": "ref"}
    common = {"settings": {}, "model": {}, "computed_at": "then", "key": key}
    document = reference_document("sine", 0, record=record, **common)
    write_record(entry, record)
    write_netcdf(entry / "predictions.nc")
    if change == "key":
        document = {**document, "key": "elsewhere"}
    elif change == "no record":
        (entry / "record.json").unlink()
    elif change == "passed":  # a reference that did not pass, made to look as if it had
        record["metrics"]["chains_kept"] = 2.0
        write_record(entry, record)
        failing = reference_document("sine", 0, record=record, **common)
        document = {**failing, "passed": True}
    elif change == "floor":
        document = {**document, "diagnostics": {**document["diagnostics"], "floor_w2": 1e-9}}
    else:
        write_record(entry, {**record, "status": "diverged"})
    write_reference(entry, document)
    todo, done = plan_references([job], tmp_path)
    assert [p.key for p in todo] == [key] and not done
    assert problem in caplog.text and "computing it again" in caplog.text
