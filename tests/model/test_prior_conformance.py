"""Every prior of ``PRIORS``, with its own ``examples()``, on every registered backend: the
program's prior term is the prior's framework-free log density, its draws lie in its support,
and its dict form reads back. A new prior passes these with no test edited."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.model.priors import PRIORS, Normal, Prior, prior_from_dict
from ppl_bnn.model.spec import PRECISION_SITE

EXAMPLES = [(kind, prior) for kind, cls in PRIORS.items() for prior in cls.examples()]
IDS = [f"{kind}-{i}" for i, (kind, _) in enumerate(EXAMPLES)]
RNG_SEED = 3


def _model(prior: Prior, reference: bool = False) -> BNN:
    """A small regression BNN carrying ``prior``: on the weights for a prior on the real line,
    on the noise precision for one on (0, inf); ``reference`` swaps it for Normal(1) on the
    weights (so that the likelihood is the same and only the prior term differs)."""
    rng = np.random.default_rng(RNG_SEED)
    x, y = rng.normal(size=(12, 2)), rng.normal(size=12)
    if prior.positive:
        return BNN(x, y, hidden=[3], noise="learned", noise_prior=prior)
    return BNN(x, y, hidden=[3], prior=Normal(1.0) if reference else prior, noise=0.5)


def _constrained_log_density(prior: Prior, value: np.ndarray) -> float:
    """``log p(value)`` from the prior's framework-free density on its unconstrained space,
    less the log-Jacobian of ``exp`` for a positive prior."""
    z = np.asarray(prior.unconstrain(value), dtype=np.float64)
    jacobian = z.sum() if prior.positive else 0.0
    return float(prior.log_density_unconstrained(z, np.exp, np.log)) - jacobian


@pytest.mark.parametrize(("kind", "prior"), EXAMPLES, ids=IDS)
def test_dict_form_reads_back(kind, prior):
    assert PRIORS[kind] is type(prior)
    assert prior.to_dict()["kind"] == kind
    assert prior_from_dict(prior.to_dict()) == prior


@pytest.mark.parametrize(("kind", "prior"), EXAMPLES, ids=IDS)
def test_draws_lie_in_the_support(kind, prior):
    draws = np.asarray(prior.sample(np.random.default_rng(0), (500,)))
    assert draws.shape == (500,) and np.all(np.isfinite(draws))
    if prior.positive:
        assert np.all(draws > 0)
    np.testing.assert_allclose(
        _constrained_log_density(prior, draws[:3]),
        sum(_constrained_log_density(prior, d[None]) for d in draws[:3]),
        rtol=1e-9,
    )


@pytest.mark.parametrize("backend", backend_names())
@pytest.mark.parametrize(("kind", "prior"), EXAMPLES, ids=IDS)
def test_the_programs_prior_term_is_the_priors_log_density(kind, prior, backend):
    model, reference = _model(prior), _model(prior, reference=True)
    params = model.init_params(seed=1)
    sites = {s.name: s for s in model.spec.sites()}
    own = [
        n for n, s in sites.items() if s.prior == prior or (prior.positive and n == PRECISION_SITE)
    ]
    assert own, "the example's prior carries no site"
    prior_term = sum(_constrained_log_density(prior, np.asarray(params[n])) for n in own)
    if prior.positive:  # the likelihood differs with the precision: compare with fixed noise
        likelihood = model.log_density(params, backend) - prior_term
        weights_only = {k: v for k, v in params.items() if k != PRECISION_SITE}
        noise = float(1 / np.sqrt(params[PRECISION_SITE]))
        fixed = BNN(model.x, model.y, hidden=[3], noise=noise)
        expected = fixed.log_density(weights_only, backend)
    else:
        normal_term = sum(_constrained_log_density(Normal(1.0), np.asarray(params[n])) for n in own)
        likelihood = model.log_density(params, backend) - prior_term
        expected = reference.log_density(params, backend) - normal_term
    # float32 sums of about 30 terms of order 1: absolute error ~1e-5.
    assert likelihood == pytest.approx(expected, rel=1e-5, abs=1e-4)
