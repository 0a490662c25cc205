"""Explicit seeds: the same seed gives identical draws, a different seed different draws."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit

TINY = {
    "svi": {"num_steps": 30, "num_draws": 5},
    "nuts": {"num_warmup": 10, "num_samples": 5, "max_tree_depth": 4},
    "hmc": {"num_warmup": 10, "num_samples": 5, "num_steps": 4},
    "sgld": {"num_burnin": 10, "num_samples": 5, "thinning": 2, "batch_size": 8},
    "map": {"num_steps": 30},
    "laplace": {"num_steps": 300, "learning_rate": 0.05, "num_draws": 5},
    "lowrank": {"num_steps": 30, "num_draws": 5},
    "fullrank": {"num_steps": 30, "num_draws": 5},
    "ensemble": {"num_steps": 20, "num_members": 2},
}


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    return BNN(x, x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=16), hidden=(3,), noise="learned")


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
@pytest.mark.parametrize("method", sorted(TINY))
def test_same_seed_same_draws_different_seed_different_draws(model, method, backend):
    first = fit(model, method, backend=backend, seed=3, **TINY[method])
    again = fit(model, method, backend=backend, seed=3, **TINY[method])
    other = fit(model, method, backend=backend, seed=4, **TINY[method])
    for name in first.draws:
        np.testing.assert_array_equal(first.draws[name], again.draws[name], err_msg=name)
        assert not np.array_equal(first.draws[name], other.draws[name]), name
    assert (first.seed, other.seed) == (3, 4)


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
def test_hmc_num_steps_is_fixed_on_both_backends(model, backend):
    """A fixed ``num_steps`` stays fixed while the step size adapts (Pyro would otherwise keep
    the trajectory length and grow the number of steps)."""
    result = fit(model, "hmc", backend=backend, num_warmup=30, num_samples=10, num_steps=6)
    assert np.all(result.sample_stats["n_steps"] == 6)
