"""MC dropout and concrete dropout (``mcdropout``): the masks of training and of the draws, rate 0
as MAP, the predictive mean, learned rates, and the options."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit, layers, priors
from ppl_bnn.engine.registry import backend_names, get_backend
from ppl_bnn.methods.mcdropout import MCDropoutOptions, masked_draws
from ppl_bnn.model.dropout import Dropout, dense_weights

BACKENDS = backend_names()


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    return x, x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=40)


@pytest.fixture(scope="module")
def model(data):
    return BNN(*data, hidden=(6,), noise="learned", noise_prior=priors.PBP_NOISE_PRIOR)


def training_outputs(backend: str, model: BNN, params: dict, dropout: Dropout, seed: int):
    """The network output of the model trained with ``dropout`` at ``params``, one draw of the
    masks (the backend's seeded randomness)."""
    ops = get_backend(backend)
    program = ops.model(model.spec, dropout=dropout)
    x, _ = ops.data(model.spec, model.x, None)
    if backend == "numpyro":
        import numpyro

        conditioned = numpyro.handlers.substitute(program, data=params)
        return np.asarray(numpyro.handlers.seed(conditioned, rng_seed=seed)(x))
    import pyro
    import torch

    from ppl_bnn.backends.pyro.rng import pyro_scope, seeded_torch

    tensors = {k: torch.as_tensor(v) for k, v in params.items()}
    with pyro_scope(), seeded_torch(seed), torch.no_grad():
        return pyro.poutine.condition(program, data=tensors)(x).numpy()


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_masks_each_example_and_unit_with_inverted_scaling(backend):
    """A linear net y = x w on one input: each output is x_i m_i / (1 - p), so f / x is 0 for a
    fraction p of the examples and 1 / (1 - p) for the others; another seed, other masks."""
    n, p = 2000, 0.3
    x = np.linspace(1.0, 2.0, n)[:, None]
    model = BNN(x, x[:, 0], hidden=(), noise=1.0)
    params = {"w0": np.ones((1, 1), np.float32), "b0": np.zeros(1, np.float32)}
    ratio = training_outputs(backend, model, params, Dropout(p), seed=0)[:, 0] / x[:, 0]
    dropped = np.isclose(ratio, 0.0)
    np.testing.assert_allclose(ratio[~dropped], 1 / (1 - p), rtol=1e-6)
    se = np.sqrt(p * (1 - p) / n)
    assert abs(dropped.mean() - p) < 4 * se
    again = training_outputs(backend, model, params, Dropout(p), seed=1)[:, 0] / x[:, 0]
    assert not np.array_equal(np.isclose(again, 0.0), dropped)
    # Two draws of the weights (vectorised particles): each its own mask on the shared input.
    pair = {k: np.stack([v, v]) for k, v in params.items()}
    both = training_outputs(backend, model, pair, Dropout(p), seed=0)[..., 0] / x[:, 0]
    assert both.shape == (2, n)
    assert not np.array_equal(np.isclose(both[0], 0.0), np.isclose(both[1], 0.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_concrete_training_masks_are_relaxed_and_the_rate_is_a_site(backend):
    """Concrete masks are continuous in [0, 1 / (1 - p)], near its ends at t = 0.1, with mean 1."""
    n, p = 4000, 0.2
    x = np.ones((n, 1))
    model = BNN(x, x[:, 0], hidden=(), noise=1.0)
    params = {"w0": np.ones((1, 1), np.float32), "b0": np.zeros(1, np.float32)}
    f = training_outputs(backend, model, params, Dropout(p, concrete=True), seed=0)[:, 0]
    assert np.all((f >= 0) & (f <= 1 / (1 - p) + 1e-5))
    assert np.mean((f > 0.05) & (f < 1 / (1 - p) - 0.05)) < 0.2
    assert abs(f.mean() - 1.0) < 4 * f.std() / np.sqrt(n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rate_zero_is_map(model, backend):
    """Dropout rate 0 trains the MAP fit of the same seed, and every draw is its mode: exactly on
    Pyro; on NumPyro to float32 rounding, since the rate is an argument of the compiled
    program (one program for a whole grid of rates), whose fusions are not map's."""
    options = {"num_steps": 40, "batch_size": 20}
    dropout = fit(model, "mcdropout", backend=backend, seed=5, dropout_rate=0.0, num_draws=3,
                  **options)  # fmt: skip
    mode = fit(model, "map", backend=backend, seed=5, **options)
    rtol = 0.0 if backend == "pyro" else 1e-5
    np.testing.assert_allclose(dropout.losses, mode.losses, rtol=rtol, atol=0)
    for name, value in mode.draws.items():
        assert dropout.draws[name].shape == (1, 3, *value.shape[2:])
        for i in range(3):
            np.testing.assert_allclose(
                dropout.draws[name][0, i], value[0, 0], rtol=rtol, atol=rtol, err_msg=name
            )
    np.testing.assert_allclose(
        dropout.predict(model.x).f[:1], mode.predict(model.x).f, rtol=rtol, atol=rtol,
        err_msg="predictive",
    )  # fmt: skip
    assert dropout.info["mcdropout"]["weight_decay"] == "the prior (MAP on the log joint)"


def test_draws_zero_rows_at_the_rate_with_inverted_scaling():
    p, num, rows = 0.3, 400, 5
    mode = {"w0": np.arange(1.0, 11.0).reshape(1, 1, rows, 2), "b0": np.ones((1, 1, 2))}
    draws = masked_draws(mode, {"w0": p}, num, np.random.default_rng(0))
    assert draws["w0"].shape == (1, num, rows, 2) and draws["w0"].dtype == np.float32
    np.testing.assert_array_equal(draws["b0"], np.ones((1, num, 2)))
    w = draws["w0"][0]
    zeroed = np.all(w == 0, axis=2)  # (num, rows): whole rows go together
    kept = ~zeroed
    np.testing.assert_allclose(
        w[kept], np.broadcast_to(mode["w0"][0, 0] / (1 - p), w.shape)[kept], rtol=1e-6
    )
    se = np.sqrt(p * (1 - p) / zeroed.size)
    assert abs(zeroed.mean() - p) < 4 * se


@pytest.mark.parametrize("backend", BACKENDS)
def test_predictive_mean_of_a_linear_model_is_the_trained_prediction(data, backend):
    """E_m[x diag(m / (1 - p)) W] = x W: the mean over T draws is the prediction of the trained
    weights, within 4 Monte Carlo standard errors at every point."""
    p, num = 0.2, 400
    x, y = data
    model = BNN(x, y, hidden=(), noise=0.1)
    result = fit(model, "mcdropout", backend=backend, seed=1, num_steps=100, num_draws=num,
                 dropout_rate=p, learning_rate=0.05)  # fmt: skip
    w = result.draws["w0"][0]  # (T, 2, 1)
    kept = np.any(w != 0, axis=(0, 2))
    assert kept.all()
    trained = np.max(np.abs(w), axis=0) * np.sign(w.sum(axis=0)) * (1 - p)  # the mode's rows
    b = result.draws["b0"][0, 0]
    f = result.predict(x).f[:, :, 0]  # (T, N)
    expected = x @ trained[:, 0] + b[0]
    se = np.sqrt((x**2 @ trained[:, 0] ** 2) * p / (1 - p) / num)
    assert np.all(np.abs(f.mean(axis=0) - expected) < 4 * se + 1e-5)
    assert np.all(f.std(axis=0) > 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_step_draws_fresh_masks(model, backend):
    """With the weights all but still (learning rate 1e-8), the losses of full-batch steps
    vary only through the masks: fresh ones at every step, under Pyro's compiled ELBO too."""
    kw = {"num_steps": 20, "learning_rate": 1e-8, "num_draws": 2}
    still = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.5, **kw)
    assert len(np.unique(np.round(still.losses[1:], 3))) == 19
    still = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.0, **kw)
    np.testing.assert_allclose(still.losses[1:], still.losses[1], rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_concrete_dropout_learns_and_records_the_rates(model, backend):
    result = fit(model, "mcdropout", backend=backend, seed=0, concrete=True, num_steps=100,
                 num_draws=200, learning_rate=0.05)  # fmt: skip
    rates = result.info["dropout_rates"]
    assert set(rates) == {"w0", "w1"}
    assert all(0 < r < 1 for r in rates.values())
    assert any(abs(r - 0.1) > 1e-3 for r in rates.values())  # moved from the initial 0.1
    assert result.info["mcdropout"]["concrete"] is True
    assert result.info["mcdropout"]["rates"] == rates
    for weight, _ in dense_weights(model.spec):
        zeroed = np.all(result.draws[weight][0] == 0, axis=2)
        se = np.sqrt(rates[weight] * (1 - rates[weight]) / zeroed.size)
        assert abs(zeroed.mean() - rates[weight]) < 4 * se + 1 / zeroed.size, weight


def test_default_rates():
    assert MCDropoutOptions().dropout().rate == 0.01
    assert MCDropoutOptions(dropout_rate=0.5).dropout().rate == 0.5
    concrete = MCDropoutOptions(concrete=True).dropout()
    assert (concrete.rate, concrete.temperature, concrete.regularizer) == (0.1, 0.1, 1.0)


def test_only_dense_layers_are_masked():
    """In a network with a convolution, the dense layer's rows are masked, the filters kept."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12, 4, 4, 1))
    net = [layers.Conv2d(2, 3, activation="relu"), layers.Flatten(), layers.Dense(1)]
    model = BNN(x, x.sum(axis=(1, 2, 3)), layers=net, noise=1.0)
    result = fit(model, "mcdropout", backend="pyro", seed=0, num_steps=20, num_draws=50,
                 dropout_rate=0.5)  # fmt: skip
    assert set(result.info["dropout_rates"]) == {"w1"}
    filters = result.draws["w0"][0]
    assert np.all(filters == filters[:1])
    assert np.any(np.all(result.draws["w1"][0] == 0, axis=2))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"dropout_rate": -0.1}, r"dropout_rate must be in \[0, 1\)"),
        ({"dropout_rate": 1.0}, r"dropout_rate must be in \[0, 1\)"),
        ({"dropout_rate": float("nan")}, r"dropout_rate must be in \[0, 1\)"),
        ({"dropout_rate": True}, r"dropout_rate must be in \[0, 1\)"),
        ({"dropout_rate": "0.1"}, r"dropout_rate must be in \[0, 1\)"),
        ({"dropout_rate": 0.0, "concrete": True}, r"dropout_rate must be in \(0, 1\)"),
        ({"concrete": 1}, "concrete must be True or False"),
        ({"num_draws": 0}, "num_draws must be an integer"),
        ({"temperature": 0.5}, "temperature is an option of concrete dropout"),
        ({"dropout_regularizer": 2.0}, "dropout_regularizer is an option of concrete"),
        ({"temperature": 0.0, "concrete": True}, "temperature must be a finite number > 0"),
        ({"concrete": True, "num_particles": 2}, "num_particles must be 1"),
    ],
)
def test_bad_options_are_rejected(model, options, match):
    with pytest.raises(ValueError, match=match):
        fit(model, "mcdropout", num_steps=2, **options)


def test_concrete_dropout_refuses_a_learned_prior(data):
    model = BNN(*data, hidden=(3,), noise=0.1, prior=priors.ScaleMixture(learned=True))
    with pytest.raises(ValueError, match="learned=False for concrete=True"):
        fit(model, "mcdropout", concrete=True, num_steps=2)


def program_trace(backend: str, model: BNN, params: dict, dropout: Dropout) -> dict:
    """The sites of one run of the model trained with ``dropout`` at ``params``."""
    ops = get_backend(backend)
    program = ops.model(model.spec, dropout=dropout)
    x, y = ops.data(model.spec, model.x, model.y)
    if backend == "numpyro":
        import numpyro

        conditioned = numpyro.handlers.seed(numpyro.handlers.substitute(program, params), 0)
        return numpyro.handlers.trace(conditioned).get_trace(x, y)
    import pyro
    import torch

    from ppl_bnn.backends.pyro.rng import pyro_scope, seeded_torch

    tensors = {k: torch.as_tensor(v) for k, v in params.items()}
    with pyro_scope(), seeded_torch(0), torch.no_grad():
        trace = pyro.poutine.trace(pyro.poutine.condition(program, data=tensors)).get_trace(x, y)
        return dict(trace.nodes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_concrete_regulariser_is_gal_et_al_s(model, backend):
    """The regulariser at the initial rate p: per dense layer, p / (1 - p) times the Normal(0, 1)
    prior's weight decay -|W|^2 / 2, plus K H(p) for its K input units (lambda = 2 here)."""
    p, lam = 0.3, 2.0
    params = model.init_params(seed=0)
    trace = program_trace(backend, model, params, Dropout(p, concrete=True, regularizer=lam))
    log_factor = float(np.asarray(trace["dropout_regularizer"]["fn"].log_factor))
    entropy = -(p * np.log(p) + (1 - p) * np.log(1 - p))
    expected = sum(
        p / (1 - p) * -0.5 * np.sum(params[w].astype(np.float64) ** 2) + lam * units * entropy
        for w, units in dense_weights(model.spec)
    )
    np.testing.assert_allclose(log_factor, expected, rtol=1e-5)
    rates = {name: float(np.asarray(trace[name]["value"])) for name in trace if "rate" in name}
    np.testing.assert_allclose(list(rates.values()), [p, p], rtol=1e-6)
    assert set(rates) == {"dropout_rate0", "dropout_rate1"}
    assert "dropout_regularizer" not in program_trace(backend, model, params, Dropout(p))


def test_a_fit_with_learned_rates_is_saved_and_loaded(model, tmp_path):
    result = fit(model, "mcdropout", seed=0, concrete=True, num_steps=5, num_draws=3)
    loaded = type(result).load(result.save(tmp_path / "fit"))
    assert loaded.info["dropout_rates"] == result.info["dropout_rates"]
    assert loaded.info["mcdropout"] == result.info["mcdropout"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_particles_average_several_masks(model, backend):
    """num_particles masks per step (vectorised on both backends) train as one does."""
    result = fit(model, "mcdropout", backend=backend, seed=0, num_steps=5, num_draws=2,
                 num_particles=3, dropout_rate=0.5)  # fmt: skip
    assert np.all(np.isfinite(result.losses))
    assert result.draws["w0"].shape == (1, 2, 2, 6)
