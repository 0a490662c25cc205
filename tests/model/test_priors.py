"""Priors as objects: the same log density in both PPLs and in closed form, initial draws from
the prior, the unconstrained parametrisation, and serialisation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ppl_bnn.model.priors import Gamma, Normal, prior_from_dict

VALUES = np.array([[-1.3, 0.0, 0.4], [2.2, -0.7, 1.1]])


def _closed_form(prior, value: np.ndarray) -> float:
    if isinstance(prior, Normal):
        return float(stats.norm.logpdf(value, 0.0, prior.scale).sum())
    return float(stats.gamma.logpdf(value, prior.concentration, scale=1 / prior.rate).sum())


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
@pytest.mark.parametrize(
    ("prior", "value"),
    [
        (Normal(0.7), VALUES),
        (Gamma(6.0, 6.0), np.array(0.8)),
        (Gamma(2.0, 0.5), np.abs(VALUES) + 0.1),
    ],
    ids=["normal", "gamma-scalar", "gamma-array"],
)
def test_log_density_matches_the_closed_form_on_both_backends(prior, value, backend):
    if backend == "numpyro":
        import jax.numpy as jnp
        import numpyro.distributions as dist

        logp = prior.distribution(dist, value.shape).log_prob(jnp.asarray(value))
    else:
        import pyro.distributions as dist
        import torch

        logp = prior.distribution(dist, value.shape).log_prob(torch.as_tensor(value))
    # float32 arithmetic on terms of order 10: absolute error ~1e-6.
    assert float(logp) == pytest.approx(_closed_form(prior, value), rel=1e-6, abs=1e-5)


@pytest.mark.parametrize("prior", [Normal(1.5), Gamma(3.0, 2.0)], ids=["normal", "gamma"])
def test_log_density_unconstrained_adds_the_log_jacobian(prior):
    z = np.array([[-0.4, 0.3], [1.2, -2.0]])
    theta = np.exp(z) if prior.positive else z
    log_jacobian = z.sum() if prior.positive else 0.0
    expected = _closed_form(prior, theta) + log_jacobian
    assert float(prior.log_density_unconstrained(z, np.exp)) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(prior.unconstrain(theta), z, rtol=1e-12)


def test_draws_follow_the_prior():
    rng = np.random.default_rng(0)
    normal = Normal(2.0).sample(rng, (20_000,))
    gamma = Gamma(6.0, 3.0).sample(rng, (20_000,))
    # Monte Carlo error of the mean: sd / sqrt(n); 4 standard errors.
    assert abs(normal.mean()) < 4 * 2.0 / np.sqrt(20_000)
    assert abs(gamma.mean() - 2.0) < 4 * np.sqrt(6.0) / 3.0 / np.sqrt(20_000)
    assert gamma.min() > 0


@pytest.mark.parametrize("prior", [Normal(0.3), Gamma(6.0, 6.0)], ids=["normal", "gamma"])
def test_to_dict_round_trip(prior):
    assert prior_from_dict(prior.to_dict()) == prior


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Normal(0.0), "Normal scale must be finite and > 0"),
        (lambda: Normal(float("nan")), "Normal scale must be finite and > 0"),
        (lambda: Normal("1"), "Normal scale must be finite and > 0"),
        (lambda: Gamma(-1.0, 1.0), "Gamma concentration must be finite and > 0"),
        (lambda: Gamma(1.0, float("inf")), "Gamma rate must be finite and > 0"),
        (
            lambda: prior_from_dict({"kind": "laplace", "scale": 1.0}),
            "unknown prior kind 'laplace'",
        ),
    ],
)
def test_bad_priors_are_rejected(build, match):
    with pytest.raises(ValueError, match=match):
        build()
