"""Minibatch SVI and the KL weight: the N/B scaling lives in the log joint and is unbiased."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoNormal
from numpyro.optim import Adam

from ppl_bnn import BNN, fit
from ppl_bnn.backends.numpyro import ops as nb
from ppl_bnn.engine.registry import backend_names, get_backend
from tests.closed_form import linear_problem


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(30, 2))
    return BNN(x, np.tanh(x[:, 0]) + 0.2 * rng.normal(size=30), hidden=(4,), noise="learned")


@pytest.mark.parametrize("backend", backend_names())
def test_minibatch_log_joint_is_unbiased(model, backend):
    """Averaged over random batches, the N/B-scaled log joint equals the full-data log joint."""
    impl = get_backend(backend)
    params = model.init_params(0)
    full = model.log_density(params, backend=backend)
    n, batch = model.num_data, 6
    rng = np.random.default_rng(0)
    estimates = []
    for _ in range(2000):
        idx = rng.choice(n, batch, replace=False)
        x, y = impl.data(model.spec, model.x[idx], model.y[idx])
        estimates.append(impl.log_density(model.spec, x, y, params, likelihood_scale=n / batch))
    estimates = np.asarray(estimates)
    stderr = estimates.std() / np.sqrt(len(estimates))
    assert abs(estimates.mean() - full) < 4 * stderr
    assert stderr < 0.05 * abs(full)  # the check has teeth: an unscaled batch misses by ~N/B


def test_minibatch_elbo_mean_matches_full_batch_elbo(model):
    """NumPyro's Trace_ELBO on minibatches of the scaled model is unbiased for the full ELBO."""
    program = nb.model(model.spec)
    guide = AutoNormal(program, init_scale=0.05)
    x, y = nb.data(model.spec, model.x, model.y)
    elbo = Trace_ELBO(num_particles=64)
    svi = SVI(program, guide, Adam(0.01), elbo)
    params = svi.get_params(svi.init(jax.random.PRNGKey(0), x, y))
    loss = jax.jit(
        lambda key, xb, yb, s: elbo.loss(key, params, program, guide, xb, yb, likelihood_scale=s)
    )
    n, batch = model.num_data, 5
    keys = jax.random.split(jax.random.PRNGKey(1), 600)
    full = np.array([loss(k, x, y, 1.0) for k in keys[:200]])
    rng = np.random.default_rng(1)
    mini = []
    for k in keys:
        idx = rng.choice(n, batch, replace=False)
        mini.append(loss(k, x[idx], y[idx], n / batch))
    mini = np.asarray(mini)
    stderr = np.hypot(full.std() / np.sqrt(len(full)), mini.std() / np.sqrt(len(mini)))
    assert abs(mini.mean() - full.mean()) < 4 * stderr
    # Forgetting the N/B scale (the classic 1/M KL-weighting slip) is far outside that band.
    unscaled = np.mean([loss(k, x[:batch], y[:batch], 1.0) for k in keys[:100]])
    assert abs(unscaled - full.mean()) > 20 * stderr


def _guide_moments(result):
    loc = np.concatenate([result.variational["loc"]["w0"][:, 0], result.variational["loc"]["b0"]])
    scale = np.concatenate(
        [result.variational["scale"]["w0"][:, 0], result.variational["scale"]["b0"]]
    )
    return loc, scale


@pytest.mark.parametrize("backend", backend_names())
def test_minibatch_svi_matches_exact_posterior(backend):
    problem = linear_problem()
    result = fit(
        problem.model,
        "svi",
        backend=backend,
        seed=6,
        batch_size=10,
        num_steps=6000,
        learning_rate=0.003,
        num_particles=8,
        num_draws=10,
    )
    assert result.info["batch_size"] == 10 and not result.info["tempered"]
    loc, scale = _guide_moments(result)
    np.testing.assert_allclose(loc, problem.mean, atol=0.06)
    np.testing.assert_allclose(np.log(scale), np.log(problem.std), atol=0.15)


@pytest.mark.parametrize("backend", backend_names())
def test_kl_weight_targets_the_tempered_posterior(backend):
    """beta-VI with beta = 2 on a diagonal Gaussian posterior recovers p(theta) p(y|theta)^(1/2)."""
    tempered = linear_problem(likelihood_scale=0.5)
    result = fit(
        tempered.model,
        "svi",
        backend=backend,
        seed=7,
        kl_weight=2.0,
        num_steps=5000,
        learning_rate=0.005,
        num_particles=8,
        num_draws=10,
    )
    assert result.info["tempered"] and result.info["kl_weight"] == 2.0
    loc, scale = _guide_moments(result)
    np.testing.assert_allclose(loc, tempered.mean, atol=0.05)
    np.testing.assert_allclose(np.log(scale), np.log(tempered.std), atol=0.1)
    assert np.all(scale > 1.3 * linear_problem().std)  # wider than the untempered posterior
