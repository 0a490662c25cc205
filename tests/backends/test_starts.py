"""Deep-ensemble chain starts on NumPyro (:mod:`ppl_bnn.backends.numpyro.starts`): every member
reaches the mode of a posterior that has one, members that never reach a finite log density are
left out (all of them: refused with the cause), and a learned noise starts at the ensemble
predictive's."""

from __future__ import annotations

import numpy as np
import pytest

import ppl_bnn.backends.numpyro.starts as starts
from ppl_bnn import BNN, priors
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.model.spec import PRECISION_SITE
from ppl_bnn.predictive import forward_draws
from tests.closed_form import flat_draws, linear_problem

pytestmark = pytest.mark.runtime(10)  # seconds on 2 cores: started first (tests/conftest.py)


@pytest.fixture(scope="module")
def learned_noise() -> BNN:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(30, 2))
    y = np.tanh(x[:, 0]) - x[:, 1] + 0.1 * rng.normal(size=30)
    return BNN(x, y, hidden=(4,), noise="learned", noise_prior=priors.PBP_NOISE_PRIOR)


def test_every_member_reaches_the_mode_of_a_gaussian_posterior():
    """Bayesian linear regression with a known noise: one mode, the posterior mean."""
    problem = linear_problem(correlation=0.5)
    values, info = starts.ensemble_starts("nuts", Target.build("numpyro", problem.model), 4, 0)
    found = flat_draws({site: v[None] for site, v in values.items()})[0]  # (member, 3)
    assert info["num_starts"] == 4 and len(info["start_log_density"]) == 4
    np.testing.assert_allclose(found, np.broadcast_to(problem.mean, found.shape), atol=1e-3)
    assert "start_noise" not in info  # a known noise is the model's


def test_a_learned_noise_starts_at_the_ensemble_predictive(learned_noise):
    """sigma_k^2 start = sigma_k^2 + mean over training points of the members' variance; members
    from different initial weights end in different modes, and the same seed gives the same."""
    target = Target.build("numpyro", learned_noise)
    values, info = starts.ensemble_starts("mclmc", target, 3, 7)
    noise_map = np.asarray(info["start_noise_map"])
    f = forward_draws("numpyro", learned_noise.spec, values, learned_noise.x)[..., 0]
    spread = np.mean(np.var(f, axis=0))
    np.testing.assert_allclose(info["start_noise"], np.sqrt(noise_map**2 + spread), rtol=1e-4)
    np.testing.assert_allclose(1 / np.sqrt(values[PRECISION_SITE]), info["start_noise"], rtol=1e-4)
    assert spread > 0 and len(np.unique(values["w0"][:, 0, 0])) == 3
    again, _ = starts.ensemble_starts("mclmc", target, 3, 7)
    for site, v in values.items():
        np.testing.assert_array_equal(again[site], v)


def _poisoned(monkeypatch, members: set[int]) -> None:
    """Members ``members`` start at a NaN weight, so no log density they visit is finite."""
    original, calls = starts.scaled_values, []

    def scaled(model, seed):
        values = original(model, seed)
        if len(calls) in members:
            values["w0"] = np.full_like(values["w0"], np.nan)
        calls.append(seed)
        return values

    monkeypatch.setattr(starts, "scaled_values", scaled)


def test_a_member_with_no_finite_log_density_is_left_out(learned_noise, monkeypatch):
    _poisoned(monkeypatch, {1})
    values, info = starts.ensemble_starts("mclmc", Target.build("numpyro", learned_noise), 3, 7)
    assert info["num_starts"] == 2 and values["w0"].shape[0] == 2
    assert info["start_log_density"][1] is None
    assert all(np.isfinite(v).all() for v in values.values())


def test_no_finite_member_is_refused_with_the_cause(learned_noise, monkeypatch):
    _poisoned(monkeypatch, {0, 1, 2})
    target = Target.build("numpyro", learned_noise)
    with pytest.raises(DivergedError, match="every member of the starting ensemble") as info:
        starts.ensemble_starts("mclmc", target, 3, 7)
    assert info.value.method == "mclmc" and "before any chain started" in str(info.value)
