"""SGLD: the pure update, the closed-form posterior (full batch and minibatch), divergence."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.csghmc import CSGHMCOptions
from ppl_bnn.methods.csgld import CSGLDOptions
from ppl_bnn.methods.initialisation import scaled_values
from ppl_bnn.methods.sghmc import SGHMCOptions
from ppl_bnn.methods.sgld import SGLDOptions, sgld, step_size_schedule
from ppl_bnn.methods.sgmcmc import STEP_RATE
from ppl_bnn.seeding import child_seed
from tests.closed_form import flat_draws, linear_problem

# Per backend: (step size, thinning, kept draws). Step sizes are small next to the posterior
# variance (0.024): the Euler bias on the variance is about step / (4 var), 5% here.
FULL_BATCH = {"numpyro": (0.005, 10, 5000), "pyro": (0.005, 10, 3000)}
MINIBATCH = {"numpyro": (0.002, 10, 5000), "pyro": (0.002, 10, 4000)}


def test_step_is_the_welling_teh_update():
    schedule = step_size_schedule(
        SGLDOptions(step_size=0.1, schedule="polynomial", schedule_offset=2.0, schedule_decay=1.0)
    )
    assert schedule(0) == pytest.approx(0.05)
    assert schedule(8) == pytest.approx(0.01)
    init, step = sgld(schedule, temperature=4.0)
    state = init({"a": np.array([1.0, 2.0])})
    new, info = step(state, -3.0, {"a": np.array([2.0, -2.0])}, {"a": np.array([0.5, 1.0])})
    eps = 0.05
    expected = np.array([1.0, 2.0]) + 0.5 * eps * np.array([2.0, -2.0])
    expected += np.sqrt(eps * 4.0) * np.array([0.5, 1.0])
    np.testing.assert_allclose(new.position["a"], expected)
    assert (new.step, info.step_size, info.log_density) == (1, pytest.approx(eps), -3.0)
    assert state.position["a"][0] == 1.0  # the old state is untouched


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
def test_full_batch_sgld_matches_exact_posterior(problem, backend):
    step_size, thinning, kept = FULL_BATCH[backend]
    result = fit(
        problem.model,
        "sgld",
        backend=backend,
        seed=1,
        step_size=step_size,
        num_burnin=500,
        thinning=thinning,
        num_samples=kept,
    )
    assert result.draws["w0"].shape == (1, kept, 2, 1)
    assert result.info["batch_size"] == problem.model.num_data
    assert not result.info["diverged"] and not result.info["tempered"]
    assert result.sample_stats["step_size"].shape == (1, kept)
    np.testing.assert_allclose(result.sample_stats["step_size"], step_size, rtol=1e-6)
    _check_against_exact(result, problem)


@pytest.mark.parametrize("backend", backend_names())
def test_minibatch_sgld_matches_exact_posterior(problem, backend):
    step_size, thinning, kept = MINIBATCH[backend]
    result = fit(
        problem.model,
        "sgld",
        backend=backend,
        seed=2,
        step_size=step_size,
        batch_size=20,
        num_burnin=1000,
        thinning=thinning,
        num_samples=kept,
    )
    assert result.info["batch_size"] == 20
    _check_against_exact(result, problem)


def test_temperature_scales_the_posterior_variance(problem):
    result = fit(
        problem.model,
        "sgld",
        backend="numpyro",
        seed=3,
        step_size=0.005,
        temperature=2.0,
        num_burnin=500,
        thinning=10,
        num_samples=5000,
    )
    assert result.info["tempered"]
    draws = flat_draws(result.draws).reshape(-1, 3)
    np.testing.assert_allclose(draws.var(axis=0) / problem.std**2, 2.0, rtol=0.2)


@pytest.mark.parametrize("backend", backend_names())
def test_divergence_keeps_the_draws_before_it(problem, backend):
    # |1 - step * precision / 2| = 1.5: the chain grows geometrically until it overflows.
    result = fit(
        problem.model,
        "sgld",
        backend=backend,
        seed=0,
        step_size=0.122,
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


@pytest.mark.parametrize("backend", backend_names())
def test_divergence_before_any_draw_is_an_error(problem, backend):
    with pytest.raises(
        DivergedError,
        match=r"before any draw was kept; likely cause: step size too large \(step_size=50\)",
    ):
        fit(problem.model, "sgld", backend=backend, step_size=50.0, num_burnin=100, num_samples=5)


def test_bad_sgld_options(problem):
    with pytest.raises(ValueError, match=r"unknown schedule 'cosine'; allowed: constant, polyn"):
        fit(problem.model, "sgld", schedule="cosine")
    with pytest.raises(ValueError, match=r"schedule_decay must be in \(0.5, 1\]"):
        fit(problem.model, "sgld", schedule_decay=0.3)
    with pytest.raises(ValueError, match=r"batch_size 100 exceeds the 40 training points"):
        fit(problem.model, "sgld", batch_size=100)
    with pytest.raises(ValueError, match=r"temperature must be a finite number > 0"):
        fit(problem.model, "sgld", temperature=0)
    with pytest.raises(ValueError, match=r"unknown init_loc 'map' for an SG-MCMC chain; availab"):
        fit(problem.model, "sgld", init_loc="map")
    with pytest.raises(ValueError, match=r"step_size must be a finite number > 0"):
        fit(problem.model, "sgld", step_size=-1e-4)


def test_the_default_step_size_is_a_rate_per_training_point():
    assert SGLDOptions().for_data(500).step_size == pytest.approx(STEP_RATE / 500)
    assert SGLDOptions(step_size=1e-3).for_data(500).step_size == 1e-3  # given: kept
    # SGHMC's momentum lengthens its steady step by 1 / friction: its rate is scaled by the
    # friction. The cyclical peak is half the constant schedule's.
    assert SGHMCOptions(friction=0.2).for_data(500).step_size == pytest.approx(
        0.2 * STEP_RATE / 500
    )
    assert CSGLDOptions().for_data(500).step_size == pytest.approx(STEP_RATE / 2 / 500)
    assert CSGHMCOptions(friction=0.2).for_data(500).step_size == pytest.approx(
        0.2 * STEP_RATE / 2 / 500
    )


@pytest.mark.parametrize("backend", backend_names())
def test_chains_start_at_their_own_scaled_draw_and_step_at_the_rate_per_point(problem, backend):
    short = {"backend": backend, "seed": 4, "num_burnin": 0, "thinning": 1, "num_samples": 1}
    # Steps of 1e-9 leave each chain where it started.
    result = fit(problem.model, "sgld", num_chains=2, step_size=1e-9, **short)
    for chain in range(2):
        start = scaled_values(problem.model, child_seed(4, f"sgld_init{chain}"))
        for site in ("w0", "b0"):
            np.testing.assert_allclose(result.draws[site][chain, 0], start[site], atol=1e-3)
    assert np.abs(result.draws["w0"][0] - result.draws["w0"][1]).max() > 0.1
    default = fit(problem.model, "sgld", **short)
    n = problem.model.num_data
    np.testing.assert_allclose(default.sample_stats["step_size"], STEP_RATE / n, rtol=1e-6)
