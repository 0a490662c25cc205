"""The linearised (GLM) predictive: the Jacobian-vector product per draw on both backends, its
checks of the mode, and its plumbing through ``fit``, ``FitResult.predict`` and save/load."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.layers import AvgPool2d, Conv2d, Dense, Flatten
from ppl_bnn.methods.base import Method, RunOutput
from ppl_bnn.predictive import log_likelihood_per_draw, predictive_at
from ppl_bnn.results import ResultFileError

BACKENDS = backend_names()


def _params(spec, rng, lead, scale=1.0):
    """Random values of every site with leading axes ``lead`` (a positive precision)."""
    out = {}
    for site in spec.sites():
        value = scale * rng.normal(size=(*lead, *site.shape))
        out[site.name] = np.exp(value) if site.positive else value
    return {k: v.astype(np.float32) for k, v in out.items()}


def _tanh_forward(params, x):
    """A tanh MLP in float64 numpy: one draw's params (no draw axes)."""
    layers = sum(1 for k in params if k.startswith("w"))
    h = np.asarray(x, dtype=np.float64)
    for layer in range(layers):
        h = h @ np.asarray(params[f"w{layer}"], np.float64) + params[f"b{layer}"]
        if layer < layers - 1:
            h = np.tanh(h)
    return h


@pytest.fixture(scope="module")
def tanh_model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 2))
    return BNN(x, rng.normal(size=8), hidden=(5, 4), activation="tanh", noise="learned")


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_network_linear_in_its_weights_gives_the_ordinary_predictive(backend, likelihood):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(9, 3))
    if likelihood == "gaussian":
        model = BNN(x, rng.normal(size=9), hidden=(), noise="learned")
    else:
        model = BNN(x, rng.integers(0, 3, 9), hidden=(), likelihood="categorical", num_classes=3)
    draws = _params(model.spec, rng, (2, 3), scale=2.0)
    mode = {k: v[0, 0] + 5.0 for k, v in _params(model.spec, rng, (1, 1)).items()}
    x32 = model.x.astype(np.float32)
    plain = predictive_at(backend, model.spec, draws, x32)
    lin = predictive_at(backend, model.spec, draws, x32, linearised_at=mode)
    np.testing.assert_allclose(lin.f, plain.f, rtol=1e-5, atol=1e-4)
    if likelihood == "gaussian":
        np.testing.assert_array_equal(lin.noise_std, plain.noise_std)


@pytest.mark.parametrize("backend", BACKENDS)
def test_draws_at_the_mode_give_the_network_at_the_mode(tanh_model, backend):
    spec, x = tanh_model.spec, tanh_model.x.astype(np.float32)
    mode = {k: v[0, 0] for k, v in _params(spec, np.random.default_rng(2), (1, 1)).items()}
    at_mode = {k: np.broadcast_to(v, (1, 4, *v.shape)) for k, v in mode.items()}
    lin = predictive_at(backend, spec, at_mode, x, linearised_at=mode)
    expected = _tanh_forward(mode, x)
    np.testing.assert_allclose(lin.f, np.broadcast_to(expected, lin.f.shape), rtol=1e-5, atol=1e-6)


def test_the_jvp_is_the_directional_derivative_and_the_backends_agree(tanh_model):
    """``f_lin(mode + v) - f(mode) = J v``, against a float64 central difference of the network;
    the noise keeps each draw's own value; both backends give the same outputs."""
    spec, x = tanh_model.spec, tanh_model.x.astype(np.float32)
    rng = np.random.default_rng(3)
    mode = {k: v[0, 0] for k, v in _params(spec, rng, (1, 1)).items()}
    directions = {k: 0.5 * rng.normal(size=(3, *v.shape)) for k, v in mode.items()}
    draws = {k: (mode[k] + directions[k]).astype(np.float32)[None] for k in mode}
    draws["precision"] = np.array([[0.5, 2.0, 4.0]], dtype=np.float32)
    weights = [k for k in mode if k != "precision"]
    # In float64, along the directions as the float32 draws hold them.
    at = {k: mode[k].astype(np.float64) for k in weights}
    tangents = {k: draws[k][0].astype(np.float64) - at[k] for k in weights}
    h = 1e-6
    jv = []
    for s in range(3):
        up = {k: at[k] + h * tangents[k][s] for k in weights}
        down = {k: at[k] - h * tangents[k][s] for k in weights}
        jv.append((_tanh_forward(up, x) - _tanh_forward(down, x)) / (2 * h))
    jv = np.stack(jv)
    f_mode = _tanh_forward(mode, x)
    f = {}
    for backend in BACKENDS:
        pred = predictive_at(backend, spec, draws, x, linearised_at=mode)
        f[backend] = pred.f
        np.testing.assert_allclose(pred.f - f_mode, jv, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(pred.noise_std, [0.5**-0.5, 2**-0.5, 0.5], rtol=1e-6)
        plain = predictive_at(backend, spec, draws, x).f
        assert np.abs(plain - pred.f).max() > 0.05  # the linearisation is not the network
    np.testing.assert_allclose(f["numpyro"], f["pyro"], rtol=1e-5, atol=1e-6)


def test_the_backends_agree_through_convolution_and_pooling():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 6, 6, 1))
    stack = [Conv2d(2, 3, padding="same", activation="tanh"), AvgPool2d(2), Flatten(), Dense(3)]
    model = BNN(x, rng.integers(0, 3, 5), layers=stack, likelihood="categorical", num_classes=3)
    mode = {k: v[0, 0] for k, v in _params(model.spec, rng, (1, 1)).items()}
    draws = {k: mode[k] + 0.3 * v for k, v in _params(model.spec, rng, (1, 3)).items()}
    x32 = model.x.astype(np.float32)
    f = {b: predictive_at(b, model.spec, draws, x32, linearised_at=mode).f for b in BACKENDS}
    assert f["numpyro"].shape == (3, 5, 3)
    np.testing.assert_allclose(f["numpyro"], f["pyro"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda m: m.pop("b1"), r"linearised_at lacks the weight site 'b1'"),
        (lambda m: m.update(w0=np.zeros((2, 3))), r"linearised_at\['w0'\] has shape \(2, 3\)"),
        (lambda m: m["w1"].__setitem__((0, 0), np.nan), r"linearised_at\['w1'\] has non-finite"),
        (lambda m: m.update(w9=np.zeros(3)), r"names site\(s\) 'w9' that the model does not"),
        (lambda m: m.update(b0="abc"), r"linearised_at\['b0'\] is not an array of numbers"),
    ],
)
def test_a_bad_mode_is_refused_naming_the_site(tanh_model, edit, match):
    spec, x = tanh_model.spec, tanh_model.x.astype(np.float32)
    draws = _params(spec, np.random.default_rng(5), (1, 2))
    mode = {k: v[0, 0].copy() for k, v in draws.items()}
    edit(mode)
    with pytest.raises(ValueError, match=match):
        predictive_at("numpyro", spec, draws, x, linearised_at=mode)


def test_a_mode_that_is_no_mapping_is_refused(tanh_model):
    draws = _params(tanh_model.spec, np.random.default_rng(5), (1, 2))
    with pytest.raises(ValueError, match="linearised_at must map site names to arrays, got list"):
        predictive_at("pyro", tanh_model.spec, draws, tanh_model.x, linearised_at=[1.0])


# --- fit, FitResult.predict, save/load, with a runner standing in for a GLM method -----------


def _stub_fit(model, monkeypatch, backend, linearised):
    """``fit(model, "map")`` whose runner returns 6 fixed draws around a fixed mode, with the
    mode as ``linearised_at`` when ``linearised``."""
    rng = np.random.default_rng(6)
    mode = {k: v[0, 0] for k, v in _params(model.spec, rng, (1, 1)).items()}
    draws = {k: (mode[k] + 0.4 * rng.normal(size=(1, 6, *v.shape))) for k, v in mode.items()}
    draws["precision"] = np.exp(draws["precision"])
    draws = {k: v.astype(np.float32) for k, v in draws.items()}

    def runner(name, target, options, seed):
        timings = {"compile": 0.0, "warmup": 0.0, "sampling": 0.0}
        return RunOutput(draws=draws, timings=timings, linearised_at=mode if linearised else None)

    monkeypatch.setattr(Method, "run_on", lambda self, backend: runner)
    return fit(model, "map", backend=backend, seed=0), draws, mode


@pytest.mark.parametrize("backend", BACKENDS)
def test_fit_predict_and_save_use_the_linearisation(tanh_model, backend, monkeypatch, tmp_path):
    result, draws, mode = _stub_fit(tanh_model, monkeypatch, backend, linearised=True)
    x = tanh_model.x.astype(np.float32)
    lin = predictive_at(backend, tanh_model.spec, draws, x, linearised_at=mode)
    plain = predictive_at(backend, tanh_model.spec, draws, x)
    ll = log_likelihood_per_draw(tanh_model.spec, lin.f, lin.noise_std, tanh_model.y)
    assert set(result.linearised_at) == set(mode) - {"precision"}  # the noise is not linearised
    np.testing.assert_allclose(result.log_likelihood, ll[None], rtol=1e-6)
    plain_ll = log_likelihood_per_draw(tanh_model.spec, plain.f, plain.noise_std, tanh_model.y)
    assert np.abs(result.log_likelihood - plain_ll[None]).max() > 1e-2
    np.testing.assert_allclose(result.predict(tanh_model.x).f, lin.f, rtol=1e-6)
    idata = result.to_arviz()
    np.testing.assert_allclose(idata.log_likelihood["y"].values, ll[None], rtol=1e-6)

    path = result.save(tmp_path / "fit")
    assert (path / "linearised.nc").is_file()
    loaded = FitResult.load(path)
    for name, value in result.linearised_at.items():
        np.testing.assert_array_equal(loaded.linearised_at[name], value)
    np.testing.assert_allclose(loaded.predict(tanh_model.x).f, lin.f, rtol=1e-6)


def test_a_result_without_a_mode_keeps_the_predictive_over_draws(tanh_model, monkeypatch, tmp_path):
    result, draws, _ = _stub_fit(tanh_model, monkeypatch, "numpyro", linearised=False)
    plain = predictive_at("numpyro", tanh_model.spec, draws, tanh_model.x.astype(np.float32))
    ll = log_likelihood_per_draw(tanh_model.spec, plain.f, plain.noise_std, tanh_model.y)
    assert result.linearised_at is None
    np.testing.assert_allclose(result.log_likelihood, ll[None], rtol=1e-6)
    np.testing.assert_allclose(result.predict(tanh_model.x).f, plain.f, rtol=1e-6)
    path = result.save(tmp_path / "fit")
    assert sorted(p.name for p in path.iterdir()) == ["fit.json", "inference_data.nc"]
    # Saved before the linearised predictive existed: no has_linearised key.
    meta = json.loads((path / "fit.json").read_text())
    assert meta.pop("has_linearised") is False
    (path / "fit.json").write_text(json.dumps(meta))
    assert FitResult.load(path).linearised_at is None


def test_load_refuses_a_missing_or_bad_mode_file(tanh_model, monkeypatch, tmp_path):
    import xarray as xr

    result, _, _ = _stub_fit(tanh_model, monkeypatch, "numpyro", linearised=True)
    path = result.save(tmp_path / "fit")
    stored = path / "linearised.nc"
    with xr.open_dataset(stored, engine="h5netcdf") as dataset:
        bad = dataset.load()
    bad["w0"][0, 0] = np.nan
    stored.unlink()
    with pytest.raises(ResultFileError, match=r"linearised.nc is missing, but fit.json says"):
        FitResult.load(path)
    bad.to_netcdf(stored, engine="h5netcdf")
    with pytest.raises(ResultFileError, match=r"linearised.nc: linearised_at\['w0'\] has non-fin"):
        FitResult.load(path)


def test_fit_refuses_a_runner_mode_missing_a_site(tanh_model, monkeypatch):
    rng = np.random.default_rng(7)
    draws = _params(tanh_model.spec, rng, (1, 2))
    mode = {k: v[0, 0] for k, v in draws.items() if k != "w1"}

    def runner(name, target, options, seed):
        timings = {"compile": 0.0, "warmup": 0.0, "sampling": 0.0}
        return RunOutput(draws=draws, timings=timings, linearised_at=mode)

    monkeypatch.setattr(Method, "run_on", lambda self, backend: runner)
    with pytest.raises(ValueError, match="linearised_at lacks the weight site 'w1'"):
        fit(tanh_model, "map", backend="numpyro", seed=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_few_draws_at_a_time_give_the_same_outputs(tanh_model, backend, monkeypatch):
    import ppl_bnn.engine.contracts as backends_base

    spec, x = tanh_model.spec, tanh_model.x.astype(np.float32)
    rng = np.random.default_rng(8)
    mode = {k: v[0, 0] for k, v in _params(spec, rng, (1, 1)).items()}
    draws = _params(spec, rng, (1, 5))
    whole = predictive_at(backend, spec, draws, x, linearised_at=mode).f
    monkeypatch.setattr(backends_base, "_BATCH_FLOATS", 2 * 8 * 5)  # 2 draws per batch
    assert backends_base.draws_per_batch(spec, 8) == 2
    parts = predictive_at(backend, spec, draws, x, linearised_at=mode).f
    np.testing.assert_allclose(parts, whole, rtol=1e-6, atol=1e-6)
    assert parts.shape == (5, 8, 1)
