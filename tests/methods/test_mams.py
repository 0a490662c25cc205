"""``mams`` (:mod:`ppl_bnn.methods.mams`, driver :mod:`ppl_bnn.backends.numpyro.mams`): what a
run records, a chain that cannot move dropped through the microcanonical driver it shares with
``mclmc``, Pyro refused with the reason, bad options refused by name, and its memory bound.

Its draws against a closed-form posterior are in ``tests/methods/test_known_posterior.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ppl_bnn.backends.numpyro.mams as mams_driver
import ppl_bnn.backends.numpyro.mclmc as shared_driver
from ppl_bnn import BNN, fit, priors
from ppl_bnn.methods import get_method, make_options
from ppl_bnn.methods.mams import MAMSOptions
from ppl_bnn.methods.memory import FLOAT32, required_bytes

pytestmark = pytest.mark.runtime(20)  # seconds on 2 cores: started first (tests/conftest.py)

OPTIONS = {"num_warmup": 100, "num_samples": 50, "num_chains": 3}


@pytest.fixture(scope="module")
def model() -> BNN:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    y = x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=16)
    return BNN(x, y, hidden=(3,), noise="learned", noise_prior=priors.PBP_NOISE_PRIOR)


def test_a_run_records_its_acceptance_gradients_and_timings(model):
    result = fit(model, "mams", seed=0, **OPTIONS)
    assert result.draws["w0"].shape == (3, 50, 2, 3)
    for stat in ("lp", "accept_prob", "n_steps", "diverging", "step_size"):
        assert result.sample_stats[stat].shape == (3, 50), stat
    info = result.info
    assert (info["frozen_chains"], info["dropped_chains"]) == ([], [])
    assert len(info["step_size"]) == len(info["L"]) == len(info["acceptance"]) == 3
    # L follows the step size at the mean steps per proposal; the tuner aimed at 0.9.
    np.testing.assert_allclose(np.divide(info["L"], info["step_size"]), 2.0, rtol=1e-5)
    assert min(info["acceptance"]) > 0.6
    # Each kept draw is 4 proposals of at least one integrator step (a gradient) each.
    assert result.sample_stats["n_steps"].min() >= 4
    assert result.timings["warmup"] > 0 and result.timings["sampling"] > 0


def test_a_chain_started_where_the_density_is_not_finite_is_dropped(model, monkeypatch):
    original = shared_driver._starts

    def starts(*args):
        positions, info = original(*args)
        return positions.at[1].set(jnp.nan), info

    monkeypatch.setattr(shared_driver, "_starts", starts)
    result = fit(model, "mams", seed=0, **OPTIONS)
    assert result.info["frozen_chains"] == [1]
    assert [d["chain"] for d in result.info["dropped_chains"]] == [1]
    assert result.draws["w0"].shape == (2, 50, 2, 3)
    assert np.all(np.isfinite(result.draws["w0"]))


def test_pyro_is_refused_with_the_reason(model):
    with pytest.raises(
        ValueError,
        match=r"'mams' is not available on backend 'pyro': it declares no 'mams'; BlackJAX",
    ):
        fit(model, "mams", backend="pyro", **OPTIONS)


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [
        ("num_warmup", 5, "num_warmup"),
        ("num_samples", 0, "num_samples"),
        ("thinning", 0, "thinning"),
        ("num_chains", 0, "num_chains"),
        ("target_accept", 1.0, r"target_accept must be in \(0, 1\)"),
        ("target_accept", 0.0, "target_accept"),
        ("num_integration_steps", 1.0, "num_integration_steps must be above 1.1"),
        ("step_size", 1e-9, "step_size must be at least"),
        ("diagonal_preconditioning", "yes", "diagonal_preconditioning"),
        ("init", "prior", "init"),
    ],
)
def test_bad_options_are_refused_by_name(option, value, match):
    with pytest.raises(ValueError, match=match):
        MAMSOptions(**{option: value})


def test_the_memory_bound_counts_the_tuners_history():
    """BlackJAX's tuner keeps every position of its dual-averaging phases, of every chain."""
    x = np.linspace(-1, 1, 20)[:, None]
    model = BNN(x, x[:, 0], hidden=(10,), noise=0.1)  # 31 weights
    options = make_options(get_method("mams", "numpyro"), {"num_chains": 2, "num_warmup": 100})
    parts = required_bytes(model.spec, options, 20)
    assert parts["the method's covariance or mass matrix"] == 2 * 100 * 31 * FLOAT32


def test_a_number_of_steps_that_is_not_a_number_is_one_step():
    """A step size that is not finite asks for a number of steps that is not a number: one
    step is taken instead of a loop that never ends."""
    key = jax.random.PRNGKey(0)
    assert int(mams_driver._integration_steps(key, jnp.nan)) == 1
    assert int(mams_driver._integration_steps(key, jnp.inf)) == 1
    counts = jax.vmap(lambda k: mams_driver._integration_steps(k, 2.0))(jax.random.split(key, 4000))
    assert counts.min() >= 1 and abs(float(counts.mean()) - 2.0) < 0.1
