"""Where the Gaussian guides' means start (``init_loc``), on both backends."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.data import load_dataset
from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.initialisation import (
    UNIFORM_RADIUS,
    scaled_values,
    seeded_values,
    uniform_values,
)
from ppl_bnn.methods.svi import SVIOptions
from ppl_bnn.seeding import child_seed

pytestmark = pytest.mark.runtime(90)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = backend_names()
SEED = 5
#: One Adam step moves each parameter by at most about the learning rate, whatever the gradient.
FROZEN = {"num_steps": 1, "learning_rate": 1e-9, "num_draws": 2}


@pytest.fixture(scope="module")
def model() -> BNN:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 2))
    return BNN(x, np.tanh(x[:, 0]) + 0.1 * rng.normal(size=24), hidden=(4,), noise="learned")


def _unconstrained(model: BNN, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {s.name: s.prior.unconstrain(np.asarray(values[s.name])) for s in model.spec.sites()}


def _assert_locs(result, expected: dict[str, np.ndarray], atol: float) -> None:
    locs = result.variational["loc"]
    assert set(locs) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(locs[name], value, atol=atol, err_msg=name)


@pytest.mark.parametrize("value", ["zero", "Prior", 0, None])
def test_an_unknown_init_loc_is_named(value) -> None:
    with pytest.raises(ValueError, match=r"unknown init_loc .*available: uniform, prior, map"):
        SVIOptions(init_loc=value)


def test_a_seeded_start_is_one_of_three(model) -> None:
    assert seeded_values(model, "scaled", 3).keys() == seeded_values(model, "prior", 3).keys()
    with pytest.raises(ValueError, match="unknown seeded start 'map'; available: scaled, unif"):
        seeded_values(model, "map", 3)


def test_init_map_steps_must_be_a_positive_integer() -> None:
    with pytest.raises(ValueError, match="init_map_steps must be an integer >= 1"):
        SVIOptions(init_map_steps=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_map_fit_starts_fan_in_scaled_unless_told_otherwise(model, backend) -> None:
    def start(**options) -> dict[str, np.ndarray]:
        result = fit(model, "map", backend=backend, seed=SEED, num_steps=1, **options)
        return {k: v[0, 0] for k, v in result.draws.items()}

    init_seed = child_seed(SEED, "init_loc")
    one_step = 1.5 * 0.01  # Adam moves each value by at most ~lr per step
    for options, values in [
        ({}, scaled_values(model, init_seed)),
        ({"init_loc": "uniform"}, uniform_values(model, init_seed)),
        ({"init_loc": "prior"}, model.init_params(init_seed)),
    ]:
        got = start(**options, learning_rate=0.01)
        for name in ("w0", "b0", "w1"):
            np.testing.assert_allclose(got[name], values[name], atol=one_step, err_msg=name)


@pytest.mark.parametrize("init_loc", ["map", "glorot", None])
def test_a_map_fit_refuses_an_unknown_start(model, init_loc) -> None:
    with pytest.raises(ValueError, match=r"unknown init_loc .* for a MAP fit; available: scaled"):
        fit(model, "map", init_loc=init_loc, num_steps=1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["svi", "lowrank", "fullrank"])
def test_prior_start_is_the_prior_draw(model, backend, method) -> None:
    result = fit(model, method, backend=backend, seed=SEED, init_loc="prior", **FROZEN)
    assert result.info["init_loc"] == "prior"
    start = model.init_params(child_seed(SEED, "init_loc"))
    if method == "svi":
        _assert_locs(result, _unconstrained(model, start), atol=1e-6)
    else:  # no per-site locs recorded: one draw at a tiny init_scale sits on the means
        tiny = fit(
            model, method, backend=backend, seed=SEED, init_loc="prior", init_scale=1e-7, **FROZEN
        )
        for name, value in start.items():
            np.testing.assert_allclose(tiny.draws[name][0, 0], value, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uniform_start_is_uniform_in_unconstrained_space(model, backend) -> None:
    result = fit(model, "svi", backend=backend, seed=SEED, init_loc="uniform", **FROZEN)
    start = uniform_values(model, child_seed(SEED, "init_loc"))
    expected = _unconstrained(model, start)
    _assert_locs(result, expected, atol=1e-6)
    flat = np.concatenate([v.ravel() for v in expected.values()])
    assert np.all(np.abs(flat) <= UNIFORM_RADIUS) and flat.std() > 0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_start_is_the_mode_of_the_short_map_fit(model, backend) -> None:
    options = {"init_map_steps": 200, "init_scale": 0.05}
    result = fit(model, "svi", backend=backend, seed=SEED, init_loc="map", **options, **FROZEN)
    assert result.info["init_map_steps"] == 200
    # The warm start's seconds are part of the warmup and recorded apart from the fit's steps.
    assert 0 < result.info["init_map_seconds"] < result.timings["warmup"]
    run = map_estimate.METHOD.run_on(backend)
    warm = map_estimate.MAPOptions(num_steps=200, learning_rate=FROZEN["learning_rate"])
    mode = run("map", Target.build(backend, model), warm, child_seed(SEED, "init_map"))
    assert mode.losses[-1] == pytest.approx(result.info["init_map_loss"])
    _assert_locs(
        result, _unconstrained(model, {k: v[0, 0] for k, v in mode.draws.items()}), atol=1e-6
    )
    for name, scale in result.variational["scale"].items():
        np.testing.assert_allclose(scale, 0.05, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_map_fit_starts_fan_in_scaled(model, backend) -> None:
    result = fit(model, "svi", backend=backend, seed=SEED, init_map_steps=1, **FROZEN)
    start = scaled_values(model, child_seed(child_seed(SEED, "init_map"), "init_loc"))
    _assert_locs(result, _unconstrained(model, start), atol=1e-6)
    assert np.all(start["b0"] == 0) and start["precision"] == 1
    # w0 has 2 inputs, w1 has 4: std 1/sqrt(2) and 1/2 (8 and 4 draws; loose bounds).
    assert 0.2 < start["w0"].std() < 1.4 and 0.1 < start["w1"].std() < 1.0


def test_map_start_uses_the_fits_learning_rate(model) -> None:
    short = {"init_map_steps": 50, "num_steps": 1, "num_draws": 2}
    slow = fit(model, "svi", seed=SEED, learning_rate=1e-9, **short)
    fast = fit(model, "svi", seed=SEED, learning_rate=0.05, **short)
    assert fast.info["init_map_loss"] < slow.info["init_map_loss"]


@pytest.mark.parametrize("init_loc", ["uniform", "prior", "map"])
def test_both_backends_start_from_the_same_means(model, init_loc) -> None:
    locs = [
        fit(
            model, "svi", backend=b, seed=SEED, init_loc=init_loc, init_map_steps=100, **FROZEN
        ).variational["loc"]
        for b in BACKENDS
    ]
    # A MAP start is 100 Adam steps in each framework's float32 arithmetic.
    atol = 1e-4 if init_loc == "map" else 1e-6
    for name in locs[0]:
        np.testing.assert_allclose(locs[0][name], locs[1][name], atol=atol, err_msg=name)


@pytest.fixture(scope="module")
def sine_004():
    """The sine set with seed 004's network: 1-20-20-1 relu, the noise known (std 1 in the
    original units)."""
    data = load_dataset("sine", split=0)
    model = BNN(
        data.x_train, data.y_train, hidden=(20, 20), activation="relu", noise=1.0 / data.y_std
    )
    return data, model


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_svi_knows_where_the_sine_data_lies(sine_004, backend) -> None:
    data, model = sine_004
    result = fit(model, "svi", backend=backend, seed=0, learning_rate=0.03, num_steps=1500)
    epistemic = result.predict(data.x_test).epistemic_std
    inside = epistemic[data.test_inside].mean()
    outside = epistemic[~data.test_inside].mean()
    # 1000 draws: the Monte Carlo error of a mean std is ~2% of it, far inside the margin.
    assert outside >= 3 * inside, (inside, outside)
    train_rmse = np.sqrt(np.mean((result.predict(data.x_train).mean - data.y_train) ** 2))
    assert train_rmse * data.y_std < 2.0  # the noise std is 1: the fit follows the data


def test_a_breakdown_in_the_map_warm_start_is_the_fits_own(model) -> None:
    x = model.x.copy()
    x[0, 0] = 1e30
    huge = BNN(x, model.y, hidden=(4,), activation="relu", noise=0.1)
    with pytest.raises(DivergedError, match=r"^SVI diverged .*in the MAP warm start") as info:
        fit(huge, "svi", num_steps=5, init_map_steps=5)
    assert info.value.method == "svi" and info.value.cause.startswith("inputs of magnitude")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("estimator", ["local_reparam", "flipout"])
def test_the_per_example_estimators_start_where_the_autoguide_does(model, backend, estimator):
    """The meanfield driver takes the same start as AutoNormal: here the prior draw, and the MAP
    warm start's mode (recorded in info) by default."""
    result = fit(
        model, "svi", backend=backend, seed=SEED, init_loc="prior", estimator=estimator, **FROZEN
    )
    assert result.info["init_loc"] == "prior" and result.info["estimator"] == estimator
    _assert_locs(
        result, _unconstrained(model, model.init_params(child_seed(SEED, "init_loc"))), 1e-6
    )
    default = fit(model, "svi", backend=backend, seed=SEED, estimator=estimator, **FROZEN)
    autoguide = fit(model, "svi", backend=backend, seed=SEED, **FROZEN)
    assert default.info["init_loc"] == "map"
    assert default.info["init_map_loss"] == autoguide.info["init_map_loss"]
    for name, loc in autoguide.variational["loc"].items():
        np.testing.assert_allclose(default.variational["loc"][name], loc, atol=1e-6)
