"""SWAG and MultiSWAG: the Gaussian of Maddox et al. from given snapshots, the fit on the
closed-form posterior, both backends alike, breakdowns and bad options."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from ppl_bnn import BNN, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.swag import SWAGGaussian, SWAGOptions, sgd
from tests.closed_form import flat_draws, linear_problem


def test_the_gaussian_uses_the_running_means_and_the_last_rank_snapshots():
    snapshots = np.array([[1.0, 0.0], [3.0, 2.0], [2.0, 4.0], [6.0, 2.0]])
    gaussian = SWAGGaussian.fit(snapshots, rank=2)
    np.testing.assert_allclose(gaussian.mean, [3.0, 2.0])
    # mean of squares minus squared mean: (1 + 9 + 4 + 36) / 4 - 9, (0 + 4 + 16 + 4) / 4 - 4
    np.testing.assert_allclose(gaussian.diag_variance, [3.5, 2.0])
    # running means after snapshots 3 and 4: (2, 2) and (3, 2)
    np.testing.assert_allclose(gaussian.deviations, [[0.0, 3.0], [2.0, 0.0]])


def test_draws_have_half_the_diagonal_plus_half_the_low_rank_covariance():
    rng = np.random.default_rng(0)
    gaussian = SWAGGaussian.fit(rng.normal(size=(30, 3)) @ np.diag([1.0, 2.0, 0.5]), rank=5)
    draws = gaussian.sample(np.random.default_rng(1), 200_000)
    d = gaussian.deviations
    expected = 0.5 * np.diag(gaussian.diag_variance) + 0.5 * d @ d.T / (d.shape[1] - 1)
    # Each covariance entry within 5 Monte Carlo standard errors (sqrt((s_ii s_jj + s_ij^2) / n)).
    se = np.sqrt((np.outer(np.diag(expected), np.diag(expected)) + expected**2) / len(draws))
    assert np.all(np.abs(np.cov(draws.T) - expected) < 5 * se)
    np.testing.assert_allclose(draws.mean(axis=0), gaussian.mean, atol=0.02)


def test_the_sgd_step_ascends_the_log_density_without_noise():
    init, step = sgd(0.5)
    state = init({"a": np.array([1.0, -1.0])})
    new, info = step(state, -2.0, {"a": np.array([2.0, 4.0])}, {"a": np.array([9.0, 9.0])})
    np.testing.assert_allclose(new.position["a"], [2.0, 1.0])
    assert (new.step, info.step_size, info.log_density) == (1, 0.5, -2.0)


@pytest.mark.parametrize("backend", backend_names())
def test_with_a_learned_noise_the_defaults_do_not_diverge_and_the_noise_stays_at_the_mode(backend):
    # Standardised diabetes, 50 tanh units, the noise learned: moved by SGD at a rate on the log
    # joint's scale, the MAP's high noise precision diverged within a few steps on UCI sets.
    x, y = load_diabetes(return_X_y=True)
    x, y = (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()
    model = BNN(x[:350], y[:350], hidden=(50,), activation="tanh", noise="learned")
    result = fit(model, "swag", backend=backend, seed=0)
    precision = result.draws["precision"]
    assert np.all(np.isfinite(precision)) and np.all(precision == precision.flat[0])
    sigma = result.info["noise_held_at"]
    assert sigma == pytest.approx(float(precision.flat[0]) ** -0.5, rel=1e-6)
    # The rate is on half the squared error: the log joint's gradient times sigma^2 / N.
    assert result.info["sgd_step_size"] == pytest.approx(0.01 * sigma**2 / 350)
    assert np.all(result.draws["w0"].std(axis=(0, 1)) > 0)
    # No comparison with a constant predictor: the MAP fit behind it collapses the learned
    # noise on 350 points (the defaults issue's next step), and the draws keep its noise.
    assert np.isfinite(result.predict(x[350:]).mean_log_predictive_density(y[350:]))


def test_a_known_noise_scales_the_rate_and_a_categorical_likelihood_does_not(problem):
    options = {"num_steps": 30, "num_snapshots": 4, "rank": 2, "num_draws": 5}
    known = fit(problem.model, "swag", seed=0, **options)
    n = problem.model.num_data
    assert known.info["noise_held_at"] is None
    assert known.info["sgd_step_size"] == pytest.approx(0.01 * problem.model.spec.noise**2 / n)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    labels = BNN(x, (x[:, 0] > 0).astype(int), hidden=(3,), likelihood="categorical")
    assert fit(labels, "swag", seed=0, **options).info["sgd_step_size"] == pytest.approx(0.01 / 40)


@pytest.fixture(scope="module")
def problem():
    return linear_problem()


SETTINGS = {
    "num_steps": 500,
    "learning_rate": 0.05,
    "swag_batch_size": 10,
    "num_snapshots": 100,
    "rank": 20,
    "num_draws": 2000,
    "swag_learning_rate": 0.1,
}


@pytest.fixture(scope="module")
def fits(problem):
    return {
        backend: fit(problem.model, "swag", backend=backend, seed=0, **SETTINGS)
        for backend in ("numpyro", "pyro")
    }


def test_swag_is_centred_on_the_posterior_mode(problem, fits):
    # The linear model's posterior is Gaussian: its mode is its mean. The draws' mean sits
    # within 5 standard errors of it (std / sqrt(draws) with the draws' own std) plus the SGD
    # iterates' wander around the mode, bounded by their spread.
    for result in fits.values():
        draws = flat_draws(result.draws).reshape(-1, 3)
        assert result.num_draws == 2000 and result.info["snapshots"] == 100
        assert result.info["sgd_batch_size"] == 10 and result.info["collect_every"] == 4
        assert np.all(np.abs(draws.mean(axis=0) - problem.mean) < 2 * draws.std(axis=0) + 0.02)
        assert np.all(draws.std(axis=0) > 0)


def test_both_backends_take_the_same_sgd_path(fits):
    # The same start (MAP from the same initial values and minibatches) and noise-free steps on
    # the same minibatches: the Gaussians agree up to float32 rounding.
    a, b = (flat_draws(fits[k].draws).reshape(-1, 3) for k in ("numpyro", "pyro"))
    np.testing.assert_allclose(a.mean(axis=0), b.mean(axis=0), atol=1e-3)
    np.testing.assert_allclose(a.std(axis=0), b.std(axis=0), rtol=1e-2)


def test_a_larger_learning_rate_spreads_the_iterates_further(problem):
    spread = [
        flat_draws(
            fit(problem.model, "swag", seed=0, **{**SETTINGS, "swag_learning_rate": rate}).draws
        ).std(axis=(0, 1))
        for rate in (0.02, 0.2)
    ]
    assert np.all(spread[1] > 2 * spread[0]), spread


def test_multiswag_pools_its_members_draws(problem):
    result = fit(problem.model, "multiswag", seed=0, num_members=3, **{**SETTINGS, "num_draws": 50})
    assert result.draws["w0"].shape == (1, 150, 2, 1)
    assert result.info["num_members"] == 3
    members = flat_draws(result.draws).reshape(3, 50, 3).mean(axis=1)
    assert not np.allclose(members[0], members[1])  # each member its own MAP start and SGD


@pytest.mark.parametrize("backend", backend_names())
def test_an_sgd_breakdown_names_the_swag_learning_rate(problem, backend):
    with pytest.raises(
        DivergedError, match=r"SWAG diverged.*SGD phase.*likely cause: .*swag_learning_rate=1e\+06"
    ):
        fit(problem.model, "swag", backend=backend, num_steps=50, swag_learning_rate=1e6)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rank": 50}, r"rank 50 exceeds num_snapshots 40"),
        ({"rank": 1}, r"rank must be an integer >= 2, got 1"),
        ({"swag_learning_rate": 0}, r"swag_learning_rate must be"),
        ({"num_snapshots": 0}, r"num_snapshots must be an integer >= 1"),
        ({"collect_every": 0}, r"collect_every must be an integer >= 1"),
        ({"swag_batch_size": 100}, r"batch_size 100 exceeds the 40 training points"),
        ({"kl_weight": 0.1}, r"swag follows the posterior itself: kl_weight must be 1"),
        ({"num_members": 2}, r"unknown option\(s\) 'num_members' for method 'swag'"),
    ],
)
def test_bad_swag_options_are_named(problem, options, message):
    with pytest.raises(ValueError, match=message):
        fit(problem.model, "swag", **options)


def test_the_sgd_batch_defaults_to_a_quarter_epoch_of_at_most_128():
    assert SWAGOptions().sgd_batch_size(40) == 10
    assert SWAGOptions().sgd_batch_size(60_000) == 128
    assert SWAGOptions(batch_size=32).sgd_batch_size(60_000) == 32
    assert SWAGOptions(batch_size=32, swag_batch_size=64).sgd_batch_size(60_000) == 64
