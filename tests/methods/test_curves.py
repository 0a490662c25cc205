"""svi's training curves: the ELBO split into expected log-likelihood and KL, the held-out
log-likelihood, their format on both backends and drivers, and bad held-out data."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.curves import (
    CURVE_KEY,
    CURVE_POINTS,
    HELD_OUT_DRAWS,
    checkpoint_steps,
    curve_every,
    guide_kl,
)
from ppl_bnn.methods.meanfield import monte_carlo_kl
from ppl_bnn.methods.svi import SVIOptions
from ppl_bnn.predictive import log_likelihood_per_draw, predictive_at

BACKENDS = backend_names()
ESTIMATORS = ("reparam", "local_reparam")


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 1))
    return x, np.sin(1.5 * x[:, 0]) + 0.1 * rng.normal(size=n)


@pytest.fixture(scope="module")
def model() -> BNN:
    return BNN(*_data(32, 0), hidden=(8,), noise=0.1)


@pytest.fixture(scope="module")
def held_out() -> tuple[np.ndarray, np.ndarray]:
    return _data(100, 1)


FIT = {"num_steps": 40, "num_draws": 5, "init_map_steps": 20, "learning_rate": 0.01}


@pytest.fixture(scope="module")
def curves(model, held_out) -> dict[tuple[str, str], FitResult]:
    """A fit with minibatches of 8, KL weight 0.5 and a checkpoint every 15 steps (the last
    window shorter) per (backend, estimator)."""
    return {
        (backend, estimator): fit(
            model,
            "svi",
            backend=backend,
            seed=2,
            validation=held_out,
            curve_every=15,
            estimator=estimator,
            batch_size=8,
            kl_weight=0.5,
            **FIT,
        )
        for backend in BACKENDS
        for estimator in ESTIMATORS
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_the_two_parts_make_the_recorded_loss(curves, backend, estimator) -> None:
    """Each checkpoint's loss is the mean of the recorded losses over its window, and equals
    -(expected log-likelihood - beta KL) to float rounding: the same estimates, split."""
    result = curves[backend, estimator]
    curve = result.info[CURVE_KEY]
    assert curve["step"] == [15, 30, 40]
    windows = [(0, 15), (15, 30), (30, 40)]
    expected = [result.losses[a:b].mean() for a, b in windows]
    np.testing.assert_allclose(curve["loss"], expected, rtol=1e-6)
    ell, kl = np.asarray(curve["expected_log_lik"]), np.asarray(curve["kl"])
    np.testing.assert_allclose(-np.asarray(curve["loss"]), ell - 0.5 * kl, rtol=1e-5, atol=1e-3)
    assert curve["kl_weight"] == 0.5
    assert curve["kl_form"] == "closed form"
    assert len(curve["held_out_ll"]) == len(curve["kl_checkpoint"]) == 3
    assert curve["num_held_out"] == 100 and curve["draws"] == HELD_OUT_DRAWS
    assert result.timings["curves"] > 0


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_curve_format_is_the_same_on_both_backends(curves, estimator) -> None:
    numpyro, pyro = (curves[b, estimator].info[CURVE_KEY] for b in BACKENDS)
    assert set(numpyro) == set(pyro)
    for key, value in numpyro.items():
        assert type(value) is type(pyro[key]), key
        if isinstance(value, list):
            assert len(value) == len(pyro[key]) and np.all(np.isfinite(value)), key
    assert numpyro["step"] == pyro["step"]


def test_curves_survive_save_and_load(curves, tmp_path) -> None:
    result = curves["pyro", "reparam"]
    loaded = FitResult.load(result.save(tmp_path / "fit"))
    assert loaded.info[CURVE_KEY] == result.info[CURVE_KEY]


@pytest.mark.parametrize("backend", BACKENDS)
def test_recording_leaves_the_fit_unchanged(model, held_out, curves, backend) -> None:
    """The same seed gives the same guide with or without a curve (the drivers' steps and
    random streams are unchanged; float rounding apart)."""
    plain = fit(
        model, "svi", backend=backend, seed=2, batch_size=8, kl_weight=0.5, curve_every=0, **FIT
    )
    assert CURVE_KEY not in plain.info
    recorded = curves[backend, "reparam"]
    np.testing.assert_allclose(recorded.losses, plain.losses, rtol=1e-5)
    for kind in ("loc", "scale"):
        for name, value in plain.variational[kind].items():
            np.testing.assert_allclose(recorded.variational[kind][name], value, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_matches_independent_estimates(backend) -> None:
    """With a guide that barely moves (learning rate 1e-7), a window of 300 minibatch steps
    estimates E_q[log p(y | theta)] on all N points (scaled by N / B) and KL(q || p) (the
    reparameterised loss's Monte Carlo log q - log p): both agree with estimates made here from
    the fitted guide, within 5 standard errors simulated from the same guide."""
    x, y = _data(24, 3)
    small = BNN(x, y, hidden=(4,), noise=0.3)
    steps, batch = 300, 6
    result = fit(
        small,
        "svi",
        backend=backend,
        seed=4,
        num_steps=steps,
        curve_every=steps,
        batch_size=batch,
        learning_rate=1e-7,
        init_map_steps=20,
        num_draws=5,
    )
    curve = result.info[CURVE_KEY]
    loc, scale = result.variational["loc"], result.variational["scale"]
    rng = np.random.default_rng(0)
    num = 4000
    draws = {k: loc[k] + scale[k] * rng.standard_normal((num, *v.shape)) for k, v in loc.items()}
    pred = predictive_at(backend, small.spec, {k: v[None] for k, v in draws.items()}, small.x)
    ll = log_likelihood_per_draw(small.spec, pred.f, pred.noise_std, small.y)  # (num, N)
    batches = np.array([rng.choice(len(y), batch, replace=False) for _ in range(num)])
    per_step = len(y) / batch * np.take_along_axis(ll, batches, axis=1).sum(axis=1)
    full = ll.sum(axis=1)
    se = np.sqrt(per_step.var() / steps + full.var() / num)
    assert abs(curve["expected_log_lik"][0] - full.mean()) < 5 * se
    kl_draws = np.array(
        [
            sum(
                monte_carlo_kl(s.prior, loc[s.name], scale[s.name], d[s.name], np)
                for s in small.spec.sites()
            )
            for d in ({k: v[i] for k, v in draws.items()} for i in range(num))
        ]
    )
    closed = curve["kl_checkpoint"][0]
    assert closed == pytest.approx(guide_kl(small.spec, loc, scale, {}), rel=1e-4)
    assert abs(closed - kl_draws.mean()) < 5 * kl_draws.std() / np.sqrt(num)
    assert abs(curve["kl"][0] - closed) < 5 * kl_draws.std() / np.sqrt(steps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_out_log_likelihood_rises_over_training(backend) -> None:
    """From a uniform start on an easy 1-D regression, the held-out log-likelihood at the last
    checkpoint is well above the first (fixed seed)."""
    x, y = _data(64, 5)
    model = BNN(x, y, hidden=(16,), noise=0.1)
    result = fit(
        model,
        "svi",
        backend=backend,
        seed=0,
        validation=_data(200, 6),
        num_steps=600,
        learning_rate=0.03,
        init_loc="uniform",
        num_draws=5,
    )
    held = result.info[CURVE_KEY]["held_out_ll"]
    assert len(held) == CURVE_POINTS
    assert held[-1] > held[0] + 1.0
    assert np.mean(held[-5:]) > np.mean(held[:5])


def test_checkpoints_and_defaults() -> None:
    assert checkpoint_steps(10, 3) == [3, 6, 9, 10]
    assert checkpoint_steps(9, 3) == [3, 6, 9]
    options = SVIOptions(num_steps=1000)
    assert curve_every(options, 1000, has_validation=False) == 0
    assert curve_every(options, 1000, has_validation=True) == 1000 // CURVE_POINTS
    assert curve_every(SVIOptions(num_steps=20), 20, has_validation=True) == 1
    assert curve_every(SVIOptions(curve_every=0), 1000, has_validation=True) == 0
    assert curve_every(SVIOptions(curve_every=7), 1000, has_validation=False) == 7
    with pytest.raises(ValueError, match="curve_every must be an integer >= 0"):
        SVIOptions(curve_every=-1)
    with pytest.raises(ValueError, match="curve_every must be an integer >= 0"):
        SVIOptions(curve_every=True)


def test_no_curve_without_a_validation_set(model) -> None:
    result = fit(model, "svi", backend="pyro", seed=0, **FIT)
    assert CURVE_KEY not in result.info


@pytest.mark.parametrize(
    ("validation", "error", "match"),
    [
        (np.zeros((3, 1)), TypeError, "validation must be a pair"),
        ((np.zeros((3, 1)),), TypeError, "validation must be a pair"),
        ((np.zeros((3, 2)), np.zeros(3)), ValueError, "x_val has 2 features"),
        ((np.zeros((3, 1)), np.zeros(4)), ValueError, "y_val has 4 entries"),
        ((np.full((3, 1), np.nan), np.zeros(3)), ValueError, "x_val contains non-finite"),
        ((np.zeros((3, 1)), np.array([0.0, np.nan, 1.0])), ValueError, "y_val contains 1 non"),
        ((np.zeros(3), np.zeros(3)), ValueError, "x_val must be 2-dimensional"),
    ],
)
def test_bad_validation_data_is_named(model, validation, error, match) -> None:
    with pytest.raises(error, match=match):
        fit(model, "svi", backend="pyro", validation=validation, **FIT)


def test_bad_validation_labels_are_named() -> None:
    x = np.random.default_rng(0).normal(size=(12, 2))
    model = BNN(x, np.arange(12) % 3, hidden=(3,), likelihood="categorical")
    with pytest.raises(ValueError, match="y_val has label 3"):
        fit(model, "svi", backend="pyro", validation=(x[:4], np.array([0, 1, 2, 3])), **FIT)


def test_validation_is_refused_by_methods_without_curves(model, held_out) -> None:
    with pytest.raises(ValueError, match="validation= is read by methods that record training"):
        fit(model, "map", backend="pyro", validation=held_out, num_steps=5)
