"""map, laplace, lowrank, fullrank and ensemble against the closed-form linear posterior."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import HessianError
from tests.closed_form import flat_draws, linear_problem

pytestmark = pytest.mark.runtime(105)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = backend_names()


@pytest.fixture(scope="module")
def correlated():
    """A posterior with correlation -0.9 between the two weights: mean-field cannot fit it."""
    problem = linear_problem(correlation=0.9)
    corr = problem.cov[0, 1] / np.sqrt(problem.cov[0, 0] * problem.cov[1, 1])
    assert corr < -0.85
    return problem


def _corr(draws: np.ndarray) -> float:
    return float(np.corrcoef(draws[:, 0], draws[:, 1])[0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_is_the_posterior_mode(correlated, backend):
    result = fit(correlated.model, "map", backend=backend, seed=0, num_steps=3000)
    assert result.draws["w0"].shape == (1, 1, 2, 1)
    np.testing.assert_allclose(flat_draws(result.draws)[0, 0], correlated.mean, atol=0.01)


@pytest.mark.parametrize("backend", BACKENDS)
def test_laplace_is_exact_for_a_gaussian_posterior(correlated, backend):
    result = fit(
        correlated.model,
        "laplace",
        backend=backend,
        seed=0,
        num_steps=3000,
        num_draws=4000,
        hessian="full",
    )
    draws = flat_draws(result.draws)[0]
    # 4000 independent draws: standard errors ~0.016 sd for means, ~1.1% for stds.
    z = (draws.mean(axis=0) - correlated.mean) / correlated.std
    assert np.all(np.abs(z) < 0.07), z
    np.testing.assert_allclose(draws.std(axis=0), correlated.std, rtol=0.05)
    exact = correlated.cov[0, 1] / np.sqrt(correlated.cov[0, 0] * correlated.cov[1, 1])
    assert abs(_corr(draws) - exact) < 0.02


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("method", "extra"), [("fullrank", {}), ("lowrank", {"rank": 2})])
def test_gaussian_guides_capture_the_correlation(correlated, method, extra, backend):
    result = fit(
        correlated.model,
        method,
        backend=backend,
        seed=1,
        num_steps=5000,
        learning_rate=0.005,
        num_particles=8,
        num_draws=4000,
        **extra,
    )
    draws = flat_draws(result.draws)[0]
    z = (draws.mean(axis=0) - correlated.mean) / correlated.std
    assert np.all(np.abs(z) < 0.3), z
    np.testing.assert_allclose(draws.std(axis=0), correlated.std, rtol=0.15)
    exact = correlated.cov[0, 1] / np.sqrt(correlated.cov[0, 0] * correlated.cov[1, 1])
    assert abs(_corr(draws) - exact) < 0.1
    assert result.variational is None  # guide parameters are recorded for mean-field only


@pytest.mark.parametrize("backend", BACKENDS)
def test_ensemble_of_a_convex_problem_is_the_mode_repeated(correlated, backend):
    result = fit(
        correlated.model, "ensemble", backend=backend, seed=0, num_members=2, num_steps=3000
    )
    members = flat_draws(result.draws)[0]
    np.testing.assert_allclose(members, np.tile(correlated.mean, (2, 1)), atol=0.01)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ensemble_members_are_independent_map_fits(backend, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, size=(20, 1))
    model = BNN(x, np.sin(3 * x[:, 0]), hidden=(8,), noise=0.1)
    result = fit(model, "ensemble", backend=backend, seed=0, num_members=3, num_steps=300)
    assert result.draws["w0"].shape == (1, 3, 1, 8)
    assert result.losses.shape == (3, 300)
    members = result.draws["w0"][0]
    assert not np.allclose(members[0], members[1]) and not np.allclose(members[1], members[2])
    # Each member is the MAP fit with its own child seed.
    assert result.info["num_members"] == 3
    loaded = FitResult.load(result.save(tmp_path / backend))
    np.testing.assert_array_equal(loaded.losses, result.losses)


@pytest.mark.parametrize("backend", BACKENDS)
def test_laplace_away_from_a_mode_is_a_clear_error(backend):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    model = BNN(x, x[:, 0] - x[:, 1], hidden=(3,), noise="learned")
    with pytest.raises(HessianError, match=r"after 30 steps is not positive definite"):
        fit(model, "laplace", backend=backend, num_steps=30, num_draws=5, hessian="full")
