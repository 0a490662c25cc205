"""The shared-fit store: MAP's run is fitted once and read by the Laplace that starts from it,
with the same result and an honest cost."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.bench import fit_store
from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import backend_names, get_driver
from ppl_bnn.methods import get_method, make_options, shared
from ppl_bnn.methods.base import RunOutput

MAP_OPTIONS = {"num_steps": 40}


@pytest.fixture
def model(regression_data: tuple[np.ndarray, np.ndarray]) -> BNN:
    x, y = regression_data
    return BNN(x, y, hidden=(4,), noise=0.3)


@pytest.mark.parametrize("backend", backend_names())
def test_laplace_reads_the_map_run_of_its_seed_and_gets_the_same_result(
    tmp_path: Path, model: BNN, backend: str
) -> None:
    alone = fit(model, "laplace", backend=backend, seed=3, num_draws=20, **MAP_OPTIONS)
    store = tmp_path / "fits"
    with fit_store.use_store(store):
        mode = fit(model, "map", backend=backend, seed=3, **MAP_OPTIONS)
        (entry,) = store.iterdir()
        laplace = fit(model, "laplace", backend=backend, seed=3, num_draws=20, **MAP_OPTIONS)
    assert "shared_fits" not in mode.info and "shared" not in mode.timings
    (read,) = laplace.info["shared_fits"]
    assert read["method"] == "map" and entry.name == f"{read['key']}.npz"
    # The cost of the MAP run it read counts as the Laplace's own.
    assert laplace.timings["shared"] == read["seconds"] > 0
    assert laplace.timings["total"] > read["seconds"]
    for site, draws in alone.draws.items():
        np.testing.assert_array_equal(laplace.draws[site], draws)
    assert "shared_fits" not in alone.info


def test_runs_are_shared_only_with_the_same_seed_options_and_data(
    tmp_path: Path, model: BNN
) -> None:
    store = tmp_path / "fits"
    with fit_store.use_store(store):
        fit(model, "map", seed=0, **MAP_OPTIONS)
        other_seed = fit(model, "laplace", seed=1, num_draws=5, **MAP_OPTIONS)
        other_steps = fit(model, "laplace", seed=0, num_draws=5, num_steps=41)
        other_data = BNN(model.x, model.y + 1.0, hidden=(4,), noise=0.3)
        moved = fit(other_data, "laplace", seed=0, num_draws=5, **MAP_OPTIONS)
        same = fit(model, "map", seed=0, **MAP_OPTIONS)
    for result in (other_seed, other_steps, moved):
        assert "shared_fits" not in result.info
    assert len(same.info["shared_fits"]) == 1
    assert len(list(store.iterdir())) == 4


@pytest.mark.parametrize("backend", backend_names())
def test_mc_dropouts_runs_are_its_own_for_each_rate_and_never_maps(
    tmp_path: Path, model: BNN, backend: str
) -> None:
    """MC dropout trains map's driver on the model with masks, with map's options: the masks
    are part of the key, so it reads neither map's run nor another rate's."""
    store = tmp_path / "fits"
    options = {**MAP_OPTIONS, "num_draws": 4}
    with fit_store.use_store(store):
        plain = fit(model, "map", backend=backend, seed=0, **MAP_OPTIONS)
        low = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.1, **options)
        high = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.3, **options)
        again = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.3, **options)
    for result in (low, high):
        assert "shared_fits" not in result.info
    assert len(again.info["shared_fits"]) == 1
    assert len(list(store.iterdir())) == 3
    # The trained weights differ: each masked run trained under its own masks.
    for a, b in ((plain, low), (low, high)):
        assert not np.array_equal(a.draws["w0"][0, 0], b.draws["w0"][0, 0])


def test_a_run_of_other_fitting_code_is_not_read(
    tmp_path: Path, model: BNN, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "fits"
    with fit_store.use_store(store):
        fit(model, "map", seed=0, **MAP_OPTIONS)
        # As after an edit of the package's fitting code (its source hash changes).
        monkeypatch.setattr(fit_store, "fitting_code_key", lambda: "edited")
        edited = fit(model, "map", seed=0, **MAP_OPTIONS)
    assert "shared_fits" not in edited.info
    assert len(list(store.iterdir())) == 2


def test_a_run_compiled_at_another_xla_optimisation_is_not_read(
    tmp_path: Path, model: BNN, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key holds the flags that set XLA's level (whatever the rest of ``$XLA_FLAGS``): a
    reference's runs at XLA's defaults never read a cell's at ``"low"`` in the same sweep."""
    flags = os.environ.get("XLA_FLAGS", "")
    before = _map_key(model)
    monkeypatch.setenv("XLA_FLAGS", f"{flags} --xla_force_host_platform_device_count=3")
    assert _map_key(model) == before  # the device count is not part of it
    monkeypatch.setenv("XLA_FLAGS", f"{flags} --xla_backend_optimization_level=2")
    assert _map_key(model) != before


def _map_key(model: BNN, backend: str = "numpyro", seed: int = 0) -> str:
    """The store's key of ``fit(model, "map", backend=backend, seed=seed, **MAP_OPTIONS)``."""
    options = make_options(get_method("map", backend), MAP_OPTIONS, backend=backend)
    return fit_store.run_key("map", Target.build(backend, model), options, seed)


class _Payload:
    """Pickles as a call that creates ``marker``: what a hostile entry runs when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def _resave(entry: Path, change: str, marker: Path) -> None:
    """Rewrite the NPZ ``entry`` (a valid zip again) with one member changed: ``"array"``, a
    draw's value; ``"meta"``, the producing run's seconds in the JSON; ``"object"``, a draw
    replaced by an object array that needs pickle (a payload creating ``marker``)."""
    with np.load(entry) as npz:
        members = dict(npz)
    if change == "array":
        members["a0"] = members["a0"] + np.float32(1)
    elif change == "meta":
        meta = json.loads(members["meta"].tobytes())
        meta["seconds"] += 1.0
        members["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    else:
        members["a0"] = np.array([_Payload(marker)], dtype=object)
    with entry.open("wb") as handle:
        np.savez(handle, **members)


@pytest.mark.parametrize("planted", ["pickle", "object_array"])
def test_a_pickle_payload_in_the_store_is_never_run(
    tmp_path: Path, model: BNN, planted: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``.pkl`` under the old store's name is never opened; a pickle under the new entry's
    name, or an NPZ whose arrays need pickle, is set aside unread and the run done again."""
    marker = tmp_path / "payload-ran"
    payload = pickle.dumps(_Payload(marker))
    store, key = tmp_path / "fits", _map_key(model)
    entry, old = fit_store.entry_path(store, key), store / f"{key}.pkl"
    with fit_store.use_store(store):
        first = fit(model, "map", seed=0, **MAP_OPTIONS)
    assert entry.is_file()
    old.write_bytes(payload)
    if planted == "pickle":
        entry.write_bytes(payload)
    else:
        _resave(entry, "object", marker)
    bad = entry.read_bytes()
    with caplog.at_level(logging.WARNING, logger=fit_store.__name__), fit_store.use_store(store):
        again = fit(model, "map", seed=0, **MAP_OPTIONS)
        reread = fit(model, "map", seed=0, **MAP_OPTIONS)
    assert not marker.exists()
    assert "shared_fits" not in again.info and len(reread.info["shared_fits"]) == 1
    for site, draws in first.draws.items():
        np.testing.assert_array_equal(again.draws[site], draws)
        np.testing.assert_array_equal(reread.draws[site], draws)
    (aside,) = (store / fit_store.SET_ASIDE).iterdir()
    assert aside.read_bytes() == bad and entry.read_bytes() != bad
    assert str(entry) in caplog.text and str(aside) in caplog.text
    assert old.read_bytes() == payload  # never opened, never moved
    pickle.loads(payload)  # the payload is live: unpickled, it creates the marker
    assert marker.exists()


@pytest.mark.parametrize("tamper", ["array", "meta", "truncated"])
def test_a_tampered_entry_is_set_aside_and_the_run_done_again(
    tmp_path: Path, model: BNN, tamper: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry whose content no longer matches its SHA-256 (a draw or the JSON edited, the zip
    still valid) or that no longer parses (cut short) is kept aside, not read nor deleted."""
    fresh = fit(model, "map", seed=0, **MAP_OPTIONS)
    store = tmp_path / "fits"
    with fit_store.use_store(store):
        fit(model, "map", seed=0, **MAP_OPTIONS)
    (entry,) = store.iterdir()
    if tamper == "truncated":
        entry.write_bytes(entry.read_bytes()[:-100])
    else:
        _resave(entry, tamper, tmp_path / "unused")
    tampered = entry.read_bytes()
    with caplog.at_level(logging.WARNING, logger=fit_store.__name__), fit_store.use_store(store):
        again = fit(model, "map", seed=0, **MAP_OPTIONS)
    assert "shared_fits" not in again.info
    for site, draws in fresh.draws.items():
        np.testing.assert_array_equal(again.draws[site], draws)
    (aside,) = (store / fit_store.SET_ASIDE).iterdir()
    assert aside.read_bytes() == tampered and entry.read_bytes() != tampered
    (warning,) = [r for r in caplog.records if r.name == fit_store.__name__]
    assert str(entry) in warning.getMessage()


#: Values a runner's ``info`` may hold that JSON alone would change.
AWKWARD_INFO = {
    "nan": math.nan, "inf": -math.inf, "negative_zero": -0.0, "none": None, "flag": True,
    "tuple": (1, "a", (2.5, None)), "list": [1, [2.0, {"x": ()}]], "empty": {},
    "numpy": {"int64": np.int64(7), "float32": np.float32(0.1), "bool": np.bool_(False)},
    "array": np.arange(3, dtype=np.int16),
}  # fmt: skip


def _assert_identical(read: Any, original: Any, where: str = "run") -> None:
    """``read`` is ``original``: same types, same keys in the same order, arrays bit-identical
    with the same dtypes and shapes."""
    assert type(read) is type(original), where
    if isinstance(original, np.ndarray | np.generic):
        assert (read.dtype, read.shape) == (original.dtype, original.shape), where
        assert read.tobytes() == original.tobytes(), where
    elif isinstance(original, dict):
        assert list(read) == list(original), where
        for k, v in original.items():
            _assert_identical(read[k], v, f"{where}[{k!r}]")
    elif isinstance(original, list | tuple):
        assert len(read) == len(original), where
        for i, (r, o) in enumerate(zip(read, original, strict=True)):
            _assert_identical(r, o, f"{where}[{i}]")
    elif isinstance(original, float) and math.isnan(original):
        assert math.isnan(read), where
    else:
        assert read == original and repr(read) == repr(original), where


@pytest.mark.parametrize("backend", backend_names())
def test_an_entry_reads_back_exactly_the_run_it_stored(
    tmp_path: Path, model: BNN, backend: str
) -> None:
    """A real MAP run, with ``info`` values JSON alone would change added, reads back equal in
    every field of its RunOutput."""
    runs: list[RunOutput] = []
    driver = get_driver(backend, "autoguide")

    def run(*args: Any) -> RunOutput:
        out = driver(*args)
        runs.append(dataclasses.replace(out, info={**out.info, "awkward": AWKWARD_INFO}))
        return runs[-1]

    runner = shared.stored("map", run)
    options = make_options(get_method("map", backend), MAP_OPTIONS, backend=backend)
    target = Target.build(backend, model)
    with fit_store.use_store(tmp_path / "fits"):
        written = runner("map", target, options, 0)
        read = runner("map", target, options, 0)
    assert len(runs) == 1 and runs[0] is written and read is not written
    for field in dataclasses.fields(RunOutput):
        _assert_identical(getattr(read, field.name), getattr(written, field.name), field.name)


def test_a_run_the_store_would_change_is_refused_naming_the_field(
    tmp_path: Path, model: BNN
) -> None:
    def run(*_: Any) -> RunOutput:
        return RunOutput(draws={"w0": np.zeros((1, 1))}, timings={}, info={"a": {"b": {1}}})

    store = tmp_path / "fits"
    options = make_options(get_method("map", "numpyro"), MAP_OPTIONS, backend="numpyro")
    with fit_store.use_store(store), pytest.raises(TypeError, match=r"run\['info'\]\['a'\]\['b'\]"):
        shared.stored("map", run)("map", Target.build("numpyro", model), options, 0)
    assert not store.exists()
