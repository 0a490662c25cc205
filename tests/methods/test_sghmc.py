"""SGHMC: the pure update, its stationary law, the closed-form posterior, seeds, divergence."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.sghmc import SGHMCOptions, SGHMCState, sghmc
from ppl_bnn.methods.sgld import sgld
from ppl_bnn.methods.sgmcmc import step_size_schedule
from tests.closed_form import flat_draws, linear_problem

# The posterior of linear_problem() has precision 41 in every coordinate (variance 0.024). For a
# Gaussian target SGHMC's stationary variance is exactly var / (1 - step * 41 / (4 (2 - friction))):
# 2.7% high at step 0.005, friction 0.2. The integrated autocorrelation is about
# 4 friction / (step * 41) = 3.9 steps for the mean and 6.3 for the variance, so over the Pyro run's
# 8300 steps one Monte Carlo SD is 0.022 posterior SDs on the mean (4.5 SDs inside 0.1) and 0.04 on
# the variance ratio (4.3 SDs inside 0.2 - 0.027). Over 300 independent NumPyro chains of that
# length none failed; the 99th percentiles were 0.066 (mean) and 0.142 (variance).
FULL_BATCH = {"step_size": 0.005, "friction": 0.2, "num_burnin": 300, "thinning": 5}
FULL_BATCH_KEPT = {"numpyro": 4000, "pyro": 1600}
# With 20 of 40 points the minibatch gradient has variance V of 32 to 50 per coordinate, which
# raises the effective temperature by about step * V / (4 friction): 5-8% at step 0.002, friction
# 0.3, on top of 1.2% from the discretisation. Less bias costs mixing (autocorrelation about
# 4 friction / (step * 41) = 15 steps for the mean), as for SGLD. Over 300 independent NumPyro
# chains of the Pyro run's 20500 steps none failed; the 99th percentiles were 0.087 (mean) and
# 0.177 (variance).
MINIBATCH = {
    "step_size": 0.002,
    "friction": 0.3,
    "batch_size": 20,
    "num_burnin": 500,
    "thinning": 5,
}
MINIBATCH_KEPT = {"numpyro": 8000, "pyro": 4000}


def test_step_is_the_chen_fox_guestrin_update():
    schedule = step_size_schedule(
        SGHMCOptions(step_size=0.1, schedule="polynomial", schedule_offset=2.0, schedule_decay=1.0)
    )
    init, step = sghmc(schedule, temperature=4.0, friction=0.25)
    state = init({"a": np.array([1.0, 2.0])})
    np.testing.assert_array_equal(state.momentum["a"], [0.0, 0.0])  # starts at rest
    grad, noise = np.array([2.0, -2.0]), np.array([0.5, 1.0])
    new, info = step(state, -3.0, {"a": grad}, {"a": noise})
    eps = 0.05  # 0.1 / (2 + 0)
    v1 = 0.5 * eps * grad + np.sqrt(0.25 * eps * 4.0) * noise
    np.testing.assert_allclose(new.momentum["a"], v1)
    np.testing.assert_allclose(new.position["a"], np.array([1.0, 2.0]) + v1)
    assert (new.step, info.step_size, info.log_density) == (1, pytest.approx(eps), -3.0)
    assert state.position["a"][0] == 1.0  # the old state is untouched

    newer, info = step(new, -1.0, {"a": np.array([-1.0, 4.0])}, {"a": np.array([-2.0, 0.0])})
    eps = 0.1 / 3
    v2 = (
        0.75 * v1
        + 0.5 * eps * np.array([-1.0, 4.0])
        + np.sqrt(0.25 * eps * 4.0) * np.array([-2, 0])
    )
    np.testing.assert_allclose(newer.momentum["a"], v2)
    np.testing.assert_allclose(newer.position["a"], np.array([1.0, 2.0]) + v1 + v2)
    assert (newer.step, info.step_size) == (2, pytest.approx(eps))


def test_full_friction_is_sgld():
    schedule = step_size_schedule(SGHMCOptions(step_size=0.01))
    sgld_init, sgld_step = sgld(schedule, temperature=2.0)
    init, step = sghmc(schedule, temperature=2.0, friction=1.0)
    state, sgld_state = init({"a": np.array([0.3, -1.0])}), sgld_init({"a": np.array([0.3, -1.0])})
    rng = np.random.default_rng(0)
    for _ in range(3):
        grad = {"a": -4.0 * state.position["a"]}
        noise = {"a": rng.normal(size=2)}
        state, _ = step(state, 0.0, grad, noise)
        sgld_state, _ = sgld_step(sgld_state, 0.0, grad, noise)
        np.testing.assert_allclose(state.position["a"], sgld_state.position["a"], rtol=1e-12)


@pytest.mark.parametrize("friction", [0.05, 0.3, 1.0])
def test_stationary_variance_of_a_gaussian_target(friction):
    """The step is linear on a Gaussian: read its matrices off it and solve for the stationary law.

    With precision lam the stationary variance is tau / lam / (1 - eps lam / (4 (2 - friction))),
    the tempered posterior's up to a bias that vanishes with the step size.
    """
    lam, tau = 41.0, 1.5
    for eps in (0.02, 0.002, 0.0002):
        _, step = sghmc(step_size_schedule(SGHMCOptions(step_size=eps)), tau, friction)

        def move(z, v, xi, step=step):
            new, _ = step(SGHMCState({"z": z}, {"z": v}, 0), 0.0, {"z": -lam * z}, {"z": xi})
            return np.array([new.position["z"], new.momentum["z"]])

        a = np.column_stack([move(1.0, 0.0, 0.0), move(0.0, 1.0, 0.0)])
        b = move(0.0, 0.0, 1.0)
        assert max(abs(np.linalg.eigvals(a))) < 1
        # Stationary covariance S = A S A^T + b b^T, solved as a linear system in vec(S).
        cov = np.linalg.solve(np.eye(4) - np.kron(a, a), np.outer(b, b).ravel()).reshape(2, 2)
        expected = tau / lam / (1 - eps * lam / (4 * (2 - friction)))
        np.testing.assert_allclose(cov[0, 0], expected, rtol=1e-10)
    assert cov[0, 0] == pytest.approx(tau / lam, rel=0.0025)


@pytest.fixture(scope="module")
def problem():
    return linear_problem()


def _check_against_exact(result, problem, mean_tol=0.1, var_tol=0.2):
    draws = flat_draws(result.draws).reshape(-1, 3)
    assert np.all(np.isfinite(draws))
    z_mean = (draws.mean(axis=0) - problem.mean) / problem.std
    var_ratio = draws.var(axis=0) / problem.std**2
    assert np.all(np.abs(z_mean) < mean_tol), z_mean
    assert np.all(np.abs(var_ratio - 1) < var_tol), var_ratio


@pytest.mark.parametrize("backend", backend_names())
def test_full_batch_sghmc_matches_exact_posterior(problem, backend):
    kept = FULL_BATCH_KEPT[backend]
    result = fit(problem.model, "sghmc", backend=backend, seed=1, num_samples=kept, **FULL_BATCH)
    assert result.draws["w0"].shape == (1, kept, 2, 1)
    assert result.options["friction"] == FULL_BATCH["friction"]
    assert result.info["batch_size"] == problem.model.num_data
    assert not result.info["diverged"] and not result.info["tempered"]
    assert set(result.sample_stats) == {"step_size", "lp"}
    np.testing.assert_allclose(result.sample_stats["step_size"], 0.005, rtol=1e-6)
    _check_against_exact(result, problem)


@pytest.mark.parametrize("backend", backend_names())
def test_minibatch_sghmc_matches_exact_posterior(problem, backend):
    kept = MINIBATCH_KEPT[backend]
    result = fit(problem.model, "sghmc", backend=backend, seed=2, num_samples=kept, **MINIBATCH)
    assert result.info["batch_size"] == 20
    _check_against_exact(result, problem)


@pytest.fixture(scope="module")
def small_model():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    return BNN(x, x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=16), hidden=(3,), noise="learned")


@pytest.mark.parametrize("backend", backend_names())
def test_same_seed_same_draws_different_seed_different_draws(small_model, backend):
    tiny = {"num_burnin": 10, "num_samples": 5, "thinning": 2, "batch_size": 8, "step_size": 1e-3}
    first = fit(small_model, "sghmc", backend=backend, seed=3, **tiny)
    again = fit(small_model, "sghmc", backend=backend, seed=3, **tiny)
    other = fit(small_model, "sghmc", backend=backend, seed=4, **tiny)
    for name in first.draws:
        assert np.all(np.isfinite(first.draws[name])), name
        np.testing.assert_array_equal(first.draws[name], again.draws[name], err_msg=name)
        assert not np.array_equal(first.draws[name], other.draws[name]), name


@pytest.mark.parametrize("backend", backend_names())
def test_divergence_keeps_the_draws_before_it(problem, backend):
    # Unstable above step * 41 = 4 (2 - friction): at 0.2 (friction 0.1) the chain grows by about
    # 1.66 per step until it overflows, some 90 steps in.
    result = fit(
        problem.model,
        "sghmc",
        backend=backend,
        seed=0,
        step_size=0.2,
        num_burnin=0,
        thinning=1,
        num_samples=2000,
    )
    assert result.info["diverged"]
    (step,) = result.info["diverged_at_step"]
    assert 50 < step < 2000
    assert result.num_draws == step
    for values in result.draws.values():
        assert np.all(np.isfinite(values))
    assert np.all(np.isfinite(result.log_likelihood))


def test_divergence_before_any_draw_is_an_error(problem):
    with pytest.raises(DivergedError, match=r"SGHMC diverged .* before any draw was kept"):
        fit(problem.model, "sghmc", backend="pyro", step_size=50.0, num_burnin=100, num_samples=5)


def test_bad_sghmc_options(problem):
    with pytest.raises(ValueError, match=r"friction must be in \(0, 1\], got 1.5"):
        fit(problem.model, "sghmc", friction=1.5)
    with pytest.raises(ValueError, match=r"friction must be a finite number > 0, got 0"):
        fit(problem.model, "sghmc", friction=0)
    with pytest.raises(ValueError, match=r"friction must be a finite number > 0, got -0.1"):
        fit(problem.model, "sghmc", friction=-0.1)
    with pytest.raises(ValueError, match=r"friction must be a finite number > 0, got 'high'"):
        fit(problem.model, "sghmc", friction="high")
    # The shared options are checked as for SGLD; SGLD itself has no friction.
    with pytest.raises(ValueError, match=r"schedule_decay must be in \(0.5, 1\]"):
        fit(problem.model, "sghmc", schedule_decay=0.3)
    with pytest.raises(ValueError, match=r"batch_size 100 exceeds the 40 training points"):
        fit(problem.model, "sghmc", batch_size=100)
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'friction' for method 'sgld'"):
        fit(problem.model, "sgld", friction=0.5)
