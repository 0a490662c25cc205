"""The scale-mixture prior inside a model: the log joint in closed form on both backends, the
two PPLs on identical weights, a learned prior's initial values, and how a prior object is
given to ``BNN``."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from ppl_bnn import BNN, BNNSpec, layers
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.priors import Normal, ScaleMixture

BACKENDS = backend_names()
MIXTURE = ScaleMixture(pi=0.3, sigma1=1.5, sigma2=0.05)


def _mixture_logpdf(prior: ScaleMixture, value: np.ndarray) -> float:
    wide = np.log(prior.pi) + stats.norm.logpdf(value, 0.0, prior.sigma1)
    narrow = np.log(1 - prior.pi) + stats.norm.logpdf(value, 0.0, prior.sigma2)
    return float(logsumexp([wide, narrow], axis=0).sum())


@pytest.fixture
def linear() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(15, 3)).astype(np.float32)
    y = (x @ np.array([1.0, 0.0, 0.02]) + 0.3 * rng.normal(size=15)).astype(np.float32)
    return x, y


@pytest.mark.parametrize("learned", [False, True], ids=["fixed", "learned"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_log_joint_with_the_mixture_matches_the_closed_form(linear, backend, learned) -> None:
    x, y = linear
    prior = ScaleMixture(0.3, 1.5, 0.05, learned=learned)
    model = BNN(x, y, hidden=(), noise=0.3, prior=prior)
    params = model.init_params(seed=3)
    w, b = (params[k].astype(np.float64) for k in ("w0", "b0"))
    f = x.astype(np.float64) @ w[:, 0] + b[0]
    expected = _mixture_logpdf(prior, w) + _mixture_logpdf(prior, b)
    expected += stats.norm.logpdf(y.astype(np.float64), f, 0.3).sum()
    # A learned prior's log density is taken at its initial values.
    assert model.log_density(params, backend) == pytest.approx(expected, rel=1e-5)


def test_both_backends_agree_on_a_hidden_network_with_the_mixture(linear) -> None:
    x, y = linear
    model = BNN(x, y, hidden=(8, 4), activation="relu", noise="learned", prior=MIXTURE)
    params = model.init_params(seed=5)
    values = [model.log_density(params, b) for b in BACKENDS]
    assert np.isfinite(values).all()
    assert values[0] == pytest.approx(values[1], rel=1e-5)
    grads = [model.grad_log_density(params, b) for b in BACKENDS]
    for name in params:
        np.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-3)


def test_pyro_log_density_ignores_a_param_store_outside(linear) -> None:
    import pyro
    import torch

    x, y = linear
    learned = BNN(x, y, hidden=(), noise=0.3, prior=ScaleMixture(0.3, 1.5, 0.05, learned=True))
    params = learned.init_params(seed=0)
    expected = BNN(x, y, hidden=(), noise=0.3, prior=MIXTURE).log_density(params, "pyro")
    with pyro.get_param_store().scope():
        pyro.param("prior_sigma2", torch.tensor(3.0))
        assert learned.log_density(params, "pyro") == pytest.approx(expected, rel=1e-6)
        assert float(pyro.param("prior_sigma2").detach()) == 3.0


def test_init_params_are_drawn_from_the_mixture() -> None:
    x = np.zeros((4, 200), dtype=np.float32)
    model = BNN(x, np.zeros(4), hidden=(100,), noise=1.0, prior=ScaleMixture(0.2, 1.0, 0.1))
    w = model.init_params(seed=0)["w0"].astype(np.float64).ravel()
    var = 0.2 * 1.0 + 0.8 * 0.01
    se = np.sqrt((3 * (0.2 + 0.8 * 1e-4) - var**2) / w.size)  # SE of the mean of w^2
    assert abs(np.mean(w**2) - var) < 4 * se


def test_a_prior_per_layer_and_the_shorthand(linear) -> None:
    x, y = linear
    model = BNN(x, y, hidden=(4,), noise=0.3, prior=[MIXTURE, Normal(0.5)])
    assert model.spec.priors == (MIXTURE, Normal(0.5))
    assert model.spec.learned_prior is None
    same = BNN(x, y, layers=[layers.Dense(4, "tanh"), layers.Dense(1)], prior=MIXTURE, noise=0.3)
    assert same.spec.priors == (MIXTURE, MIXTURE)
    spec = BNNSpec.from_dict(same.spec.to_dict())
    assert spec == same.spec and spec.priors[0] == MIXTURE


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prior": MIXTURE, "prior_scale": 0.5}, "give prior= or prior_scale=/fan_in_scaling="),
        ({"prior": MIXTURE, "fan_in_scaling": True}, "give prior= or prior_scale="),
        ({"prior": [MIXTURE] * 3}, "3 priors given but the network has 2 layers"),
        ({"prior": [MIXTURE, 0.5]}, "priors must be a prior or one prior per layer"),
        (
            {
                "prior": [
                    ScaleMixture(learned=True),
                    ScaleMixture(sigma2=0.01, learned=True),
                ]
            },
            "learned priors share one set of hyperparameters across layers",
        ),
    ],
    ids=["with-scale", "with-fan-in", "wrong-count", "not-a-prior", "two-learned"],
)
def test_bad_prior_arguments_are_named(linear, kwargs, match) -> None:
    x, y = linear
    with pytest.raises(ValueError, match=match):
        BNN(x, y, hidden=(4,), noise=0.3, **kwargs)


def test_one_learned_prior_is_shared_by_the_layers_that_carry_it(linear) -> None:
    x, y = linear
    learned = ScaleMixture(learned=True)
    model = BNN(x, y, hidden=(4, 4), noise=0.3, prior=[learned, Normal(1.0), learned])
    assert model.spec.learned_prior == learned
