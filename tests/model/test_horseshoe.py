"""The horseshoe prior: its latent sites in the model, its log density as published on both
backends, its draws' law, and its bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ppl_bnn import BNN
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.initialisation import uniform_values
from ppl_bnn.model.priors import HalfCauchy, HierarchicalPrior, Horseshoe, Normal, Prior

RNG = np.random.default_rng(5)
X, Y = RNG.normal(size=(15, 3)), RNG.normal(size=15)


def _model(prior) -> BNN:
    return BNN(X, Y, hidden=[4], prior=prior, noise=0.3)


def test_it_declares_a_scale_per_site_and_per_output_unit():
    spec = _model(Horseshoe()).spec
    sites = {s.name: s for s in spec.sites()}
    names = [s.name for s in spec.sites()]
    assert names[:3] == ["w0_tau", "w0_lambda", "w0"]
    assert sites["w0_tau"].shape == () and sites["w0_lambda"].shape == (4,)
    assert sites["w1_lambda"].shape == (1,) and sites["b0_lambda"].shape == (4,)
    assert sites["w0"].latent == (("tau", "w0_tau"), ("lambda", "w0_lambda"))
    assert {sites[f"b1_{k}"].prior for k in ("tau", "lambda")} == {HalfCauchy(1.0)}
    dims = spec.site_dims()
    assert dims["w0_lambda"] == ["layer0_out"] and dims["w0_tau"] == []
    assert isinstance(Horseshoe(), HierarchicalPrior) and not isinstance(Horseshoe(), Prior)


@pytest.mark.parametrize("backend", backend_names())
def test_the_log_joint_is_the_published_horseshoe(backend):
    prior = Horseshoe(global_scale=0.5, local_scale=2.0)
    model = _model(prior)
    params = uniform_values(model, seed=2)
    expected = 0.0
    for site in model.spec.sites():
        if site.latent:
            tau, lam = params[f"{site.name}_tau"], params[f"{site.name}_lambda"]
            expected += stats.halfcauchy.logpdf(tau, scale=0.5)
            expected += stats.halfcauchy.logpdf(lam, scale=2.0).sum()
            expected += stats.norm.logpdf(params[site.name], 0.0, tau * lam).sum()
    # The same likelihood under Normal(1) priors, whose term scipy gives too.
    reference = _model(Normal(1.0))
    kept = {s.name: params[s.name] for s in reference.spec.sites()}
    normal = sum(stats.norm.logpdf(v).sum() for v in kept.values())
    got = model.log_density(params, backend) - reference.log_density(kept, backend)
    assert got == pytest.approx(float(expected - normal), rel=1e-5, abs=1e-3)


def test_draws_shrink_as_the_horseshoe_does():
    # kappa = 1 / (1 + lambda^2) ~ Beta(1/2, 1/2) for lambda ~ C+(0, 1) (Carvalho et al. 2010).
    lam = HalfCauchy(1.0).sample(np.random.default_rng(0), (4000,))
    assert stats.kstest(1 / (1 + lam**2), stats.beta(0.5, 0.5).cdf).pvalue > 0.01
    # Marginal draws of a site: symmetric, heavier-tailed than any Normal of the same IQR.
    w = Horseshoe().sample(np.random.default_rng(1), (4000,))
    iqr = np.subtract(*np.percentile(w, [75, 25]))
    assert np.mean(np.abs(w) > 5 * iqr) > 10 * 2 * stats.norm.sf(5 * 1.349)


def test_an_initial_draw_scales_each_unit_by_its_latent_draws():
    params = _model(Horseshoe()).init_params(seed=0)
    scale = params["w0_tau"] * params["w0_lambda"]
    assert params["w0"].shape == (3, 4) and np.all(params["w0_lambda"] > 0)
    # Each column's spread follows its own scale: standardised, the weights are N(0, 1).
    z = params["w0"] / scale
    assert np.all(np.abs(z) < 5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"global_scale": 0.0}, "Horseshoe global_scale must be finite and > 0, got 0.0"),
        ({"local_scale": float("nan")}, "Horseshoe local_scale must be finite and > 0"),
        ({"global_scale": "1"}, "Horseshoe global_scale .* a str, not a number"),
    ],
)
def test_bad_scales_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Horseshoe(**kwargs)


def test_a_horseshoe_cannot_be_the_noise_prior():
    with pytest.raises(ValueError, match="noise_prior must be a prior on \\(0, inf\\)"):
        BNN(X, Y, hidden=[4], noise="learned", noise_prior=Horseshoe())


def test_half_cauchy_refuses_a_bad_scale():
    with pytest.raises(ValueError, match="HalfCauchy scale must be finite and > 0, got -1"):
        HalfCauchy(-1)
