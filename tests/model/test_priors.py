"""Priors as objects: the same log density in both PPLs and in closed form, initial draws from
the prior, the unconstrained parametrisation, and serialisation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from ppl_bnn.engine.registry import backend_names, get_backend
from ppl_bnn.model.priors import PRIORS, Gamma, Normal, ScaleMixture, prior_from_dict

VALUES = np.array([[-1.3, 0.0, 0.4], [2.2, -0.7, 1.1]])


def _closed_form(prior, value: np.ndarray) -> float:
    if isinstance(prior, Normal):
        return float(stats.norm.logpdf(value, 0.0, prior.scale).sum())
    return float(stats.gamma.logpdf(value, prior.concentration, scale=1 / prior.rate).sum())


@pytest.mark.parametrize("backend", backend_names())
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

        logp = prior.distribution(get_backend(backend).ppl, value.shape).log_prob(
            jnp.asarray(value)
        )
    else:
        import torch

        logp = prior.distribution(get_backend(backend).ppl, value.shape).log_prob(
            torch.as_tensor(value)
        )
    # float32 arithmetic on terms of order 10: absolute error ~1e-6.
    assert float(logp) == pytest.approx(_closed_form(prior, value), rel=1e-6, abs=1e-5)


@pytest.mark.parametrize("prior", [Normal(1.5), Gamma(3.0, 2.0)], ids=["normal", "gamma"])
def test_log_density_unconstrained_adds_the_log_jacobian(prior):
    z = np.array([[-0.4, 0.3], [1.2, -2.0]])
    theta = np.exp(z) if prior.positive else z
    log_jacobian = z.sum() if prior.positive else 0.0
    expected = _closed_form(prior, theta) + log_jacobian
    value = float(prior.log_density_unconstrained(z, np.exp, np.log))
    assert value == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(prior.unconstrain(theta), z, rtol=1e-12)


def test_draws_follow_the_prior():
    rng = np.random.default_rng(0)
    normal = Normal(2.0).sample(rng, (20_000,))
    gamma = Gamma(6.0, 3.0).sample(rng, (20_000,))
    # Monte Carlo error of the mean: sd / sqrt(n); 4 standard errors.
    assert abs(normal.mean()) < 4 * 2.0 / np.sqrt(20_000)
    assert abs(gamma.mean() - 2.0) < 4 * np.sqrt(6.0) / 3.0 / np.sqrt(20_000)
    assert gamma.min() > 0


@pytest.mark.parametrize(
    "prior",
    [Normal(0.3), Gamma(6.0, 6.0), ScaleMixture(0.3, 2.0, 0.05), ScaleMixture(learned=True)],
    ids=["normal", "gamma", "mixture", "mixture-learned"],
)
def test_to_dict_round_trip(prior):
    data = prior.to_dict()
    assert PRIORS[data["kind"]] is type(prior)
    assert prior_from_dict(data) == prior


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
        (lambda: ScaleMixture(pi=0.0), r"ScaleMixture pi must be in \(0, 1\), got 0.0"),
        (lambda: ScaleMixture(pi=1.0), r"ScaleMixture pi must be in \(0, 1\), got 1.0"),
        (lambda: ScaleMixture(pi="0.2"), "ScaleMixture pi must be in .*a str, not a number"),
        (lambda: ScaleMixture(sigma1=-1.0), "ScaleMixture sigma1 must be finite and > 0"),
        (lambda: ScaleMixture(sigma2=float("inf")), "ScaleMixture sigma2 must be finite and > 0"),
        (lambda: ScaleMixture(learned=1), "ScaleMixture learned must be True or False"),
        (
            lambda: prior_from_dict({"kind": "scale_mixture", "sigma3": 1.0}),
            "bad 'scale_mixture' prior .*sigma3",
        ),
    ],
)
def test_bad_priors_are_rejected(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def _mixture_closed_form(prior: ScaleMixture, value: np.ndarray) -> float:
    wide = np.log(prior.pi) + stats.norm.logpdf(value, 0.0, prior.sigma1)
    narrow = np.log(1 - prior.pi) + stats.norm.logpdf(value, 0.0, prior.sigma2)
    return float(logsumexp([wide, narrow], axis=0).sum())


MIXTURES = [ScaleMixture(), ScaleMixture(0.7, 0.05, 2.0), ScaleMixture(0.5, 0.3, 0.3)]


@pytest.mark.parametrize("backend", backend_names())
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("prior", MIXTURES, ids=["default", "narrow-first", "equal"])
def test_mixture_log_density_matches_the_closed_form(prior, shape, backend):
    value = np.resize(VALUES, shape)
    if backend == "numpyro":
        import jax.numpy as jnp

        d = prior.distribution(get_backend(backend).ppl, shape)
        logp = d.log_prob(jnp.asarray(value))
    else:
        import torch

        d = prior.distribution(get_backend(backend).ppl, shape)
        logp = d.log_prob(torch.as_tensor(value, dtype=torch.float32))
    assert tuple(d.batch_shape) == () and tuple(d.event_shape) == shape
    assert float(logp) == pytest.approx(_mixture_closed_form(prior, value), rel=1e-6, abs=1e-5)


@pytest.mark.parametrize("prior", MIXTURES, ids=["default", "narrow-first", "equal"])
def test_mixture_log_density_unconstrained_is_the_closed_form_and_stable(prior):
    z = np.array([[-1.3, 0.0, 0.4], [2.2, -0.7, 40.0]])
    assert float(prior.log_density_unconstrained(z, np.exp, np.log)) == pytest.approx(
        _mixture_closed_form(prior, z), rel=1e-12
    )
    np.testing.assert_array_equal(prior.unconstrain(z), z)
    # Far in the tail both densities underflow in float64; the factored form does not.
    far = np.array([1e3])
    assert stats.norm.pdf(far, 0.0, max(prior.sigma1, prior.sigma2))[0] == 0.0
    value = float(prior.log_density_unconstrained(far, np.exp, np.log))
    assert np.isfinite(value)
    assert value == pytest.approx(_mixture_closed_form(prior, far), rel=1e-12)


def test_mixture_draws_have_the_mixture_variance():
    prior = ScaleMixture(0.2, 1.0, 0.1)
    n = 200_000
    draws = prior.sample(np.random.default_rng(1), (n,))
    var = 0.2 * 1.0 + 0.8 * 0.01
    # Fourth moment of the mixture, 3 (pi s1^4 + (1 - pi) s2^4): SE of the mean of w^2.
    se = np.sqrt((3 * (0.2 * 1.0 + 0.8 * 1e-4) - var**2) / n)
    assert abs(np.mean(draws**2) - var) < 4 * se
    assert abs(draws.mean()) < 4 * np.sqrt(var / n)
    # The share within one narrow std: pi P(|z| < 0.1) + (1 - pi) P(|z| < 1).
    inner = 0.2 * (2 * stats.norm.cdf(0.1) - 1) + 0.8 * (2 * stats.norm.cdf(1.0) - 1)
    assert abs(np.mean(np.abs(draws) < 0.1) - inner) < 4 * np.sqrt(inner * (1 - inner) / n)
    again = prior.sample(np.random.default_rng(1), (n,))
    np.testing.assert_array_equal(draws, again)
    assert prior.sample(np.random.default_rng(0), (2, 3)).shape == (2, 3)


def test_only_a_learned_mixture_has_hyperparameters():
    assert ScaleMixture().hyperparameters == {}
    assert ScaleMixture(0.3, 2.0, 0.2, learned=True).hyperparameters == {
        "pi": (0.3, "unit_interval"),
        "sigma1": (2.0, "positive"),
        "sigma2": (0.2, "positive"),
    }
    assert not Normal(1.0).learned and not Gamma(1.0, 1.0).learned


def test_the_public_priors_module():
    from ppl_bnn import priors

    assert priors.ScaleMixture is ScaleMixture and priors.Normal is Normal
    assert priors.Gamma is Gamma
