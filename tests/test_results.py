"""FitResult: contents, ArviZ conversion, save/load, and no leaks into global state."""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import shutil
from pathlib import Path

import arviz as az
import numpy as np
import pyro
import pytest
import torch

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.results import META_FILE, ResultFileError
from ppl_bnn.units import Units

RUNS = {
    "svi": {"num_steps": 300, "num_draws": 200},
    "nuts": {"num_warmup": 50, "num_samples": 60, "num_chains": 2, "max_tree_depth": 4},
    "sgld": {"num_burnin": 200, "num_samples": 60, "thinning": 5, "step_size": 1e-3},
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, size=(20, 1))
    return x, np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=20)


@pytest.fixture(scope="module")
def model(data):
    return BNN(*data, hidden=(4,), noise="learned")


@pytest.fixture(scope="module")
def results(model):
    return {
        (method, backend): fit(model, method, backend=backend, seed=1, **options)
        for method, options in RUNS.items()
        for backend in ("numpyro", "pyro")
    }


def test_result_contents(results, model):
    for (method, backend), result in results.items():
        assert (result.method, result.backend, result.seed) == (method, backend, 1)
        chains = RUNS[method].get("num_chains", 1)
        draws = RUNS[method].get("num_draws", RUNS[method].get("num_samples"))
        assert result.draws["w0"].shape == (chains, draws, 1, 4)
        assert result.draws["precision"].shape == (chains, draws)
        assert np.all(result.draws["precision"] > 0)
        assert result.log_likelihood.shape == (chains, draws, model.num_data)
        assert np.all(np.isfinite(result.log_likelihood))
        assert set(result.timings) >= {"compile", "warmup", "sampling", "total"}
        assert all(v >= 0 for v in result.timings.values())
        assert result.timings["total"] >= result.timings["compile"]
        assert result.versions["pyro-ppl"].startswith("1.9")
        for key, value in RUNS[method].items():
            assert result.options[key] == value
        if method == "svi":
            assert result.losses.shape == (RUNS["svi"]["num_steps"],)
            assert result.losses[-20:].mean() < result.losses[:20].mean()
        elif method == "sgld":
            assert set(result.sample_stats) == {"step_size", "lp"}
            assert result.sample_stats["lp"].shape == (chains, draws)
        else:
            stats = result.sample_stats
            for name in ("diverging", "n_steps", "tree_depth", "step_size", "acceptance_rate"):
                assert stats[name].shape == (chains, draws), name
            assert np.all((stats["acceptance_rate"] >= 0) & (stats["acceptance_rate"] <= 1))
            assert np.all(stats["n_steps"] >= 1)
            assert np.all(stats["tree_depth"] <= result.options["max_tree_depth"] + 1)
    assert results["nuts", "pyro"].info["pyro_mode"] == "compiled"
    assert results["nuts", "pyro"].info["torch_threads"] == torch.get_num_threads()
    assert results["svi", "pyro"].info["elbo"] == "JitTrace_ELBO"


def test_backends_agree_on_the_predictive(results, data):
    """Same model and method on both backends: predictive means agree within Monte Carlo error."""
    x, _ = data
    for method in RUNS:
        pred_a = results[method, "numpyro"].predict(x)
        pred_b = results[method, "pyro"].predict(x)
        assert pred_a.mean.shape == pred_b.mean.shape == (x.shape[0],)
        # Tolerance: a few predictive stds (short runs, different random streams).
        gap = np.abs(pred_a.mean - pred_b.mean) / np.maximum(pred_a.std, pred_b.std)
        assert np.median(gap) < 0.5, method


def test_predict_is_consistent_with_stored_log_likelihood(results, data):
    x, y = data
    for result in results.values():
        pred = result.predict(x)
        expected = np.log(np.mean(np.exp(result.log_likelihood.reshape(-1, len(y))), axis=0))
        np.testing.assert_allclose(pred.log_predictive_density(y), expected, rtol=1e-5)
        assert np.all(pred.std > pred.epistemic_std)


def test_to_arviz_groups_dims_and_attrs(results, model):
    for (method, backend), result in results.items():
        idata = result.to_arviz()
        groups = set(idata.groups())
        assert {"posterior", "log_likelihood", "observed_data"} <= groups
        assert ("sample_stats" in groups) == (method != "svi")
        if method == "sgld":
            assert set(idata.sample_stats.data_vars) == {"step_size", "lp"}
        assert idata.posterior["w0"].dims == ("chain", "draw", "layer0_in", "layer0_out")
        assert idata.posterior["b1"].dims == ("chain", "draw", "layer1_out")
        assert idata.log_likelihood["y"].dims == ("chain", "draw", "obs")
        np.testing.assert_array_equal(idata.observed_data["y"].values, model.y)
        for attrs in (idata.attrs, idata.posterior.attrs):
            assert attrs["method"] == method
            assert attrs["backend"] == backend
            assert attrs["seed"] == 1
            assert attrs["timing_compile_s"] == result.timings["compile"]
            assert attrs["version_numpyro"] == result.versions["numpyro"]
        summary = az.summary(idata, var_names=["precision"])
        assert np.isfinite(summary.loc["precision", "mean"])


def test_loo_and_compare_work_for_every_result(results):
    idatas = {f"{m}-{b}": r.to_arviz() for (m, b), r in results.items()}
    for name, idata in idatas.items():
        loo = az.loo(idata, pointwise=True)
        assert np.isfinite(loo.elpd_loo), name
        assert loo.loo_i.shape == (20,)
    table = az.compare(idatas, ic="loo")
    assert set(table.index) == set(idatas)


def test_save_load_round_trip(results, data, tmp_path):
    x, _ = data
    for (method, backend), result in results.items():
        path = result.save(tmp_path / f"{method}-{backend}")
        loaded = FitResult.load(path)
        assert (loaded.method, loaded.backend, loaded.seed) == (method, backend, 1)
        assert loaded.spec == result.spec
        assert loaded.options == result.options
        assert loaded.timings == result.timings
        assert loaded.info == result.info
        for name in result.draws:
            np.testing.assert_array_equal(loaded.draws[name], result.draws[name])
        np.testing.assert_array_equal(loaded.log_likelihood, result.log_likelihood)
        for name in result.sample_stats:
            np.testing.assert_array_equal(loaded.sample_stats[name], result.sample_stats[name])
        if result.losses is not None:
            np.testing.assert_array_equal(loaded.losses, result.losses)
            for kind in ("loc", "scale"):
                for name, arr in result.variational[kind].items():
                    np.testing.assert_array_equal(loaded.variational[kind][name], arr)
        np.testing.assert_array_equal(loaded.predict(x).mean, result.predict(x).mean)
    assert not list(tmp_path.rglob("*.pkl"))


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no saved fit"):
        FitResult.load(tmp_path / "missing")


def test_pyro_fits_leave_param_store_and_rngs_untouched(model):
    store = pyro.get_param_store()
    store.clear()
    pyro.param("user_param", torch.tensor(2.5))
    torch_state = torch.get_rng_state()
    numpy_state = np.random.get_state()[1].copy()
    fit(model, "svi", backend="pyro", seed=0, num_steps=20, num_draws=3)
    fit(model, "nuts", backend="pyro", seed=0, num_warmup=5, num_samples=3, max_tree_depth=3)
    assert list(store.keys()) == ["user_param"]
    assert store["user_param"].detach().item() == 2.5
    assert torch.equal(torch.get_rng_state(), torch_state)
    np.testing.assert_array_equal(np.random.get_state()[1], numpy_state)
    store.clear()


def test_pyro_svi_fits_do_not_share_parameters(model):
    """Two fits with different seeds start from their own guide, not the previous fit's."""
    a = fit(model, "svi", backend="pyro", seed=0, num_steps=1, num_draws=2)
    b = fit(model, "svi", backend="pyro", seed=0, num_steps=1, num_draws=2)
    for name in a.variational["loc"]:
        np.testing.assert_array_equal(a.variational["loc"][name], b.variational["loc"][name])


# --- what save writes and load accepts ----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(model):
    """A fit that takes no compilation: Pyro SVI, eager, a few steps."""
    return fit(model, "svi", backend="pyro", seed=2, jit=False, num_steps=5, num_draws=4)


def _strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_fit_json_is_strict_and_non_finite_numbers_come_back_as_nan(tiny, tmp_path):
    nan, inf = float("nan"), float("inf")
    result = dataclasses.replace(
        tiny,
        timings={**tiny.timings, "broken": nan},
        info={**tiny.info, "trace": [1.0, nan, -inf], "note": None},
        losses=np.array([3.0, nan, inf]),
    )
    path = result.save(tmp_path / "fit")
    meta = _strict_json((path / "fit.json").read_text())
    assert meta["timings"]["broken"] is None
    assert meta["losses"] == [3.0, None, None]
    assert sorted(meta["non_finite"]) == [["info", "trace"], ["losses"], ["timings", "broken"]]
    loaded = FitResult.load(path)
    assert np.isnan(loaded.timings["broken"])
    assert loaded.info["trace"][0] == 1.0 and np.isnan(loaded.info["trace"][1:]).all()
    assert loaded.info["note"] is None  # a null that stood for nothing stays None
    np.testing.assert_array_equal(loaded.losses, [3.0, nan, nan])


def test_saved_draws_are_stored_uncompressed_and_read_by_arviz(tiny, tmp_path):
    """Draws hardly compress, and zlib more than doubled a cell's write (results.py)."""
    import h5py

    path = tiny.save(tmp_path / "fit")
    with h5py.File(path / "inference_data.nc", "r") as stored:
        filters = {
            f"{group}/{name}": stored[group][name].compression
            for group in stored
            for name in stored[group]
            if isinstance(stored[group][name], h5py.Dataset)
        }
    assert filters and set(filters.values()) == {None}, filters
    posterior = az.from_netcdf(path / "inference_data.nc").posterior
    for name, draws in tiny.draws.items():
        np.testing.assert_array_equal(posterior[name].values, draws)


def _edit_meta(path, edit) -> None:
    meta_path = path / "fit.json"
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta_path.write_text(json.dumps(meta))


def test_load_refuses_a_spec_that_does_not_fit_the_draws(tiny, tmp_path):
    path = tiny.save(tmp_path / "fit")
    _edit_meta(path, lambda meta: meta["spec"]["layers"][0].update(units=5))  # hidden (4,) -> (5,)
    with pytest.raises(ResultFileError, match=r"inference_data.nc: site 'w0' has draws of shape"):
        FitResult.load(path)


def test_load_refuses_a_folder_that_mixes_two_saves(tiny, model, tmp_path):
    other = fit(model, "map", backend="pyro", seed=2, jit=False, num_steps=5)
    first, second = tiny.save(tmp_path / "svi"), other.save(tmp_path / "map")
    shutil.copy(second / "fit.json", first / "fit.json")
    with pytest.raises(ResultFileError, match=r"holds the draws of another save .*mixes two fits"):
        FitResult.load(first)


@pytest.mark.parametrize("seed", ["two", -1, 1.5, 2**64, None, True])
def test_load_names_a_bad_seed_in_fit_json(tiny, tmp_path, seed):
    path = tiny.save(tmp_path / "fit")
    _edit_meta(path, lambda meta: meta.update(seed=seed))
    with pytest.raises(ResultFileError, match=r"fit.json: bad 'seed': seed must be a non-negative"):
        FitResult.load(path)


def test_load_says_fit_json_was_changed_when_its_seed_disagrees_with_its_own_save(tiny, tmp_path):
    path = tiny.save(tmp_path / "fit")
    _edit_meta(path, lambda meta: meta.update(seed=7))
    said = r"fit.json: 'seed' is 7, but .*inference_data.nc, written by the same save, says 2: "
    with pytest.raises(ResultFileError, match=said + "fit.json was changed after the save"):
        FitResult.load(path)


@pytest.mark.parametrize("key", ["method", "spec", "has_variational"])
def test_load_names_a_missing_key_and_the_file(tiny, tmp_path, key):
    path = tiny.save(tmp_path / "fit")
    _edit_meta(path, lambda meta: meta.pop(key))
    with pytest.raises(ResultFileError, match=rf"fit.json lacks the key\(s\) '{key}'"):
        FitResult.load(path)


def test_save_never_replaces_a_folder_holding_other_files(tiny, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"mine: it holds notes.txt, which are no saved fit"):
        tiny.save(folder)
    assert (folder / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError, match="exists and is not a folder"):
        tiny.save(tmp_path / "file")


#: What h5py raises when a netCDF write meets a full disk (the message spans two lines).
HDF5_FULL = (
    "Disable slist on flush dest failure failed (file write failed: time = Thu Nov 26 2026\n, "
    "filename = 'x.nc', file descriptor = 3, errno = 28, error message = 'No space left on "
    "device', buf = 0x55, total write size = 418, bytes this sub-write = 418, offset = 28672)"
)


def _runtime_error_from_enospc() -> RuntimeError:
    try:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError as err:
        try:
            raise RuntimeError("Disable slist on flush dest failure failed") from err
        except RuntimeError as outer:
            return outer


@pytest.mark.parametrize(
    "make",
    [
        lambda: RuntimeError(HDF5_FULL),
        lambda: OSError(errno.ENOSPC, "Can't close file (" + HDF5_FULL.split("(", 1)[1]),
        _runtime_error_from_enospc,
    ],
    ids=["runtime-error", "os-error", "chained"],
)
def test_save_on_a_full_disk_leads_with_the_cause_and_keeps_the_earlier_fit(
    tiny, model, tmp_path, monkeypatch, make
):
    path = tiny.save(tmp_path / "fit")
    newer = fit(model, "map", backend="pyro", seed=3, jit=False, num_steps=2)

    def full_disk(self, filename, **kwargs):
        Path(filename).write_bytes(b"\x89HDF\r\n")  # what was written before the disk filled
        raise make()

    monkeypatch.setattr(az.InferenceData, "to_netcdf", full_disk)
    said = r"^\[Errno 28\] No space left on device: cannot save the fit to .*fit \(writing "
    with pytest.raises(OSError, match=said + r"inference_data.nc\); .* left as it was$") as err:
        newer.save(path)
    assert err.value.errno == errno.ENOSPC and err.value.__cause__ is not None
    monkeypatch.undo()
    kept = FitResult.load(path)
    assert (kept.method, kept.seed) == ("svi", 2)
    np.testing.assert_array_equal(kept.draws["w0"], tiny.draws["w0"])
    assert [p.name for p in tmp_path.iterdir()] == ["fit"]  # no staging folder left behind


def test_save_passes_on_an_error_without_a_system_cause(tiny, tmp_path, monkeypatch):
    def broken(self, filename, **kwargs):
        raise RuntimeError("Unable to create attribute (bad value)")

    monkeypatch.setattr(az.InferenceData, "to_netcdf", broken)
    with pytest.raises(RuntimeError, match=r"^Unable to create attribute \(bad value\)$"):
        tiny.save(tmp_path / "fit")


def test_save_over_a_saved_fit_replaces_it_whole(tiny, model, tmp_path):
    other = fit(model, "map", backend="pyro", seed=2, jit=False, num_steps=5)
    path = tiny.save(tmp_path / "fit")
    assert (path / "variational.nc").is_file()
    other.save(path)
    loaded = FitResult.load(path)
    assert loaded.method == "map" and loaded.variational is None
    assert sorted(p.name for p in path.iterdir()) == ["fit.json", "inference_data.nc"]
    assert [p.name for p in tmp_path.iterdir()] == ["fit"]  # no staging folder left behind


def test_fit_logs_its_time_and_its_compiling_at_info(model, caplog):
    with caplog.at_level(logging.INFO, logger="ppl_bnn.fit"):
        result = fit(model, "map", backend="numpyro", seed=0, num_steps=20)
    line = next(r.getMessage() for r in caplog.records if "fitted in" in r.getMessage())
    total, compiling = result.timings["total"], result.timings["compile"]
    assert line == f"map on numpyro fitted in {total:.1f} s ({compiling:.1f} s of it compiling)"


def test_a_fit_with_units_predicts_from_and_in_them(results, data, tmp_path):
    """Fitted to standardised data, with the data's units: inputs in the data's units, the
    predictive in the target's (draws shifted and scaled, the noise scaled), kept by a save."""
    result, (x, _) = results[("svi", "numpyro")], data
    units = Units(np.array([0.5]), np.array([2.0]), y_mean=10.0, y_std=3.0)
    scaled = dataclasses.replace(result, units=units)
    raw = x * 2.0 + 0.5
    plain, mine = result.predict(x), scaled.predict(raw)
    np.testing.assert_allclose(mine.mean, plain.mean * 3.0 + 10.0, rtol=1e-5)
    np.testing.assert_allclose(mine.std, plain.std * 3.0, rtol=1e-5)
    back = FitResult.load(scaled.save(tmp_path / "fit"))
    np.testing.assert_allclose(back.predict(raw).mean, mine.mean)
    meta = json.loads((tmp_path / "fit" / META_FILE).read_text())
    meta["units"]["y_std"] = -1.0
    (tmp_path / "fit" / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ResultFileError, match=r"'units' cannot be read: .*a positive y_std"):
        FitResult.load(tmp_path / "fit")
    with pytest.raises(ValueError, match="positive, finite input stds"):
        Units(np.zeros(1), np.zeros(1))
