"""A hierarchical prior (the horseshoe) through ``fit``: the methods that integrate over its
scales fit it on both backends, with its latent sites in the result; the methods built on a mode
refuse it by name before any work."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods import METHODS
from ppl_bnn.priors import Horseshoe

LATENT = {"w0_tau", "w0_lambda", "b0_tau", "b0_lambda", "w1_tau", "w1_lambda"}


@pytest.fixture(scope="module")
def sparse() -> BNN:
    """y depends on the first of four inputs only."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4))
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=40)
    return BNN(x, y, hidden=[5], prior=Horseshoe(), noise=0.1)


@pytest.mark.parametrize("method", sorted(m.name for m in METHODS if m.needs_mode))
def test_methods_built_on_a_mode_refuse_it_before_any_work(sparse, method, no_fit_work):
    with pytest.raises(
        ValueError, match=f"'{method}' is built on a mode .* has none .*scales \\(nuts"
    ):
        fit(sparse, method)


@pytest.mark.parametrize("backend", backend_names())
@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("svi", {"num_steps": 300, "num_draws": 50}),
        ("svi", {"num_steps": 300, "num_draws": 50, "estimator": "flipout"}),
        ("lowrank", {"num_steps": 300, "num_draws": 50, "num_particles": 2}),
        ("hmc", {"num_warmup": 100, "num_samples": 50, "num_steps": 8}),
    ],
    ids=["svi", "svi-flipout", "lowrank-particles", "hmc"],
)
def test_methods_that_integrate_over_the_scales_fit_it(sparse, method, options, backend):
    result = fit(sparse, method, backend=backend, seed=0, **options)
    assert set(result.draws) >= LATENT
    for name in LATENT:
        assert np.all(result.draws[name] > 0), name
    posterior = result.to_arviz().posterior
    assert posterior["w0_lambda"].dims[2:] == ("layer0_out",)
    prediction = result.predict(sparse.x)
    # Better than predicting the mean with the known noise (lpd of N(mean, 0.1^2) ~ -22).
    assert prediction.mean_log_predictive_density(sparse.y) > -5
