"""Every prior of ``PRIORS``, with its own ``examples()``, on every registered backend: the
program's prior term is the prior's framework-free log density, its draws lie in its support,
and its dict form reads back. A new prior passes these with no test edited."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.initialisation import uniform_values
from ppl_bnn.model.priors import (
    PRIORS,
    HierarchicalPrior,
    Normal,
    Prior,
    SitePrior,
    prior_from_dict,
)
from ppl_bnn.model.spec import PRECISION_SITE

EXAMPLES = [(kind, prior) for kind, cls in PRIORS.items() for prior in cls.examples()]
IDS = [f"{kind}-{i}" for i, (kind, _) in enumerate(EXAMPLES)]
RNG_SEED = 3


def _model(prior: SitePrior) -> BNN:
    """A small regression BNN carrying ``prior``: on the weights for a prior on the real line,
    on the noise precision for one on (0, inf)."""
    rng = np.random.default_rng(RNG_SEED)
    x, y = rng.normal(size=(12, 2)), rng.normal(size=12)
    if prior.positive:
        return BNN(x, y, hidden=[3], noise="learned", noise_prior=prior)
    return BNN(x, y, hidden=[3], prior=prior, noise=0.5)


def _reference(model: BNN, params: dict[str, np.ndarray]) -> BNN:
    """``model`` with Normal(1) priors and its noise known (the precision in ``params``, if
    any): the same likelihood at ``params``, only the prior differs."""
    noise = model.spec.noise
    if noise == "learned":
        noise = float(1 / np.sqrt(params[PRECISION_SITE]))
    return BNN(model.x, model.y, hidden=[3], prior=Normal(1.0), noise=noise)


def _constrained_log_density(prior: Prior, value: np.ndarray) -> float:
    """``log p(value)`` from the prior's framework-free density on its unconstrained space,
    less the log-Jacobian of ``exp`` for a positive prior."""
    z = np.asarray(prior.unconstrain(value), dtype=np.float64)
    jacobian = z.sum() if prior.positive else 0.0
    return float(prior.log_density_unconstrained(z, np.exp, np.log)) - jacobian


def _log_prior(model: BNN, params: dict[str, np.ndarray]) -> float:
    """The framework-free log prior of ``params``: each site's prior (given its latent sites'
    values, for a hierarchical prior) at its value."""
    return sum(
        _constrained_log_density(site.prior_given(params), np.asarray(params[site.name]))
        for site in model.spec.sites()
    )


def _latent_draws(prior: SitePrior, rng: np.random.Generator, shape: tuple[int, ...]) -> dict:
    """Draws of a hierarchical prior's latent values for a site of ``shape`` ({} otherwise)."""
    if not isinstance(prior, HierarchicalPrior):
        return {}
    latent = prior.latent_sites(shape)
    for latent_shape, _ in latent.values():  # trailing parts of the site's shape
        assert tuple(shape[len(shape) - len(latent_shape) :]) == tuple(latent_shape)
    draws = {k: np.asarray(p.sample(rng, s)) for k, (s, p) in latent.items()}
    for name, (_, latent_prior) in latent.items():
        assert np.all(np.isfinite(draws[name]))
        assert np.all(draws[name] > 0) or not latent_prior.positive
    return draws


def _given(prior: SitePrior, latent: dict) -> Prior:
    return prior.given(latent) if isinstance(prior, HierarchicalPrior) else prior


@pytest.mark.parametrize(("kind", "prior"), EXAMPLES, ids=IDS)
def test_dict_form_reads_back(kind, prior):
    assert PRIORS[kind] is type(prior)
    assert prior.to_dict()["kind"] == kind
    assert prior_from_dict(prior.to_dict()) == prior


@pytest.mark.parametrize(("kind", "prior"), EXAMPLES, ids=IDS)
def test_draws_lie_in_the_support(kind, prior):
    rng = np.random.default_rng(0)
    draws = np.asarray(prior.sample(rng, (500,)))
    assert draws.shape == (500,) and np.all(np.isfinite(draws))
    if prior.positive:
        assert np.all(draws > 0)
    # Given its latent values (if any), the density of three values is the sum of each one's.
    latent = _latent_draws(prior, rng, (3,))
    values = np.asarray(_given(prior, latent).sample(rng, (3,)))
    one = [{k: v[i : i + 1] if v.ndim else v for k, v in latent.items()} for i in range(3)]
    np.testing.assert_allclose(
        _constrained_log_density(_given(prior, latent), values),
        sum(_constrained_log_density(_given(prior, one[i]), values[i : i + 1]) for i in range(3)),
        rtol=1e-9,
    )


@pytest.mark.parametrize("backend", backend_names())
@pytest.mark.parametrize(("kind", "prior"), EXAMPLES, ids=IDS)
def test_the_programs_prior_term_is_the_priors_log_density(kind, prior, backend):
    model = _model(prior)
    assert any(s.prior == prior for s in model.spec.sites()) or model.spec.noise_prior == prior
    params = uniform_values(model, seed=1)  # U(-2, 2) unconstrained: moderate, in the support
    reference = _reference(model, params)
    kept = {s.name: params[s.name] for s in reference.spec.sites()}
    likelihood = model.log_density(params, backend) - _log_prior(model, params)
    expected = reference.log_density(kept, backend) - _log_prior(reference, kept)
    # float32 sums of about 30 terms of order 1: absolute error ~1e-5.
    assert likelihood == pytest.approx(expected, rel=1e-5, abs=1e-4)
