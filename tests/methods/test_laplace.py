"""The GGN Laplace (``laplace``): exact on Bayesian linear regression (posterior, evidence, the
tuned prior precision and noise), the GGN against a direct computation and across backends,
its diagonal and last-layer blocks, the marginal likelihood's gradients, the draws, and bad
options."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.special
from scipy.stats import multivariate_normal

from ppl_bnn import BNN, fit, priors
from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.layers import Conv2d, Dense, Flatten, MaxPool2d
from ppl_bnn.methods import ggn, laplace
from ppl_bnn.methods.ggn import _Objective
from tests.closed_form import flat_draws, linear_problem

BACKENDS = backend_names()


# --- Bayesian linear regression: the GGN Laplace is exact ----------------------------------------


@pytest.fixture(scope="module")
def problem():
    return linear_problem(correlation=0.6)


def _design(model: BNN) -> np.ndarray:
    return np.column_stack([model.x, np.ones(model.num_data)]).astype(np.float64)


def _log_evidence(model: BNN, delta: float, sigma: float) -> float:
    """log N(y; 0, sigma^2 I + Z Z^T / delta): the exact evidence of the linear model."""
    z = _design(model)
    cov = sigma**2 * np.eye(model.num_data) + z @ z.T / delta
    return float(multivariate_normal(np.zeros(model.num_data), cov).logpdf(model.y))


def _ridge_mode(model: BNN, delta: float, sigma: float) -> dict[str, np.ndarray]:
    """The posterior mode (= mean) of the linear model, as sites."""
    z = _design(model)
    theta = np.linalg.solve(z.T @ z / sigma**2 + delta * np.eye(3), z.T @ model.y / sigma**2)
    return {"w0": theta[:2, None], "b0": theta[2:]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_ggn_laplace_of_linear_regression_is_the_exact_posterior_and_evidence(problem, backend):
    model = problem.model  # noise 1, prior N(0, 1): delta = 1
    curv = ggn.curvature(backend, model.spec, _ridge_mode(model, 1.0, 1.0), model.x, model.y)
    np.testing.assert_allclose(np.linalg.inv(curv.precision(1.0, 1.0)), problem.cov, atol=1e-9)
    np.testing.assert_allclose(curv.mean, problem.mean, atol=1e-6)
    np.testing.assert_allclose(
        curv.log_marginal_likelihood(1.0, 1.0), _log_evidence(model, 1.0, 1.0), atol=1e-5
    )


def test_the_tuned_prior_precision_maximises_the_exact_evidence(problem):
    # At the mode for delta*, the Laplace marginal likelihood is below the exact evidence at
    # every delta and equal at delta*: the evidence's maximiser delta* is also its maximiser.
    model = problem.model
    best = scipy.optimize.minimize_scalar(
        lambda u: -_log_evidence(model, math.exp(u), 1.0), bounds=(-5, 5), method="bounded",
        options={"xatol": 1e-10},
    )  # fmt: skip
    delta = math.exp(best.x)
    curv = ggn.curvature("numpyro", model.spec, _ridge_mode(model, delta, 1.0), model.x, model.y)
    tuned = ggn.tune(curv, 1.0, 1.0)
    np.testing.assert_allclose(tuned.prior_precision, [delta], rtol=1e-4)
    np.testing.assert_allclose(tuned.log_marginal_likelihood, -best.fun, atol=1e-6)
    assert tuned.noise_std == 1.0 and tuned.converged


def test_the_tuned_prior_precision_and_noise_maximise_the_exact_evidence(problem):
    # The mode depends on delta sigma^2 only: at the mode of the evidence's joint maximiser,
    # the same bound makes it the Laplace marginal likelihood's maximiser.
    model = problem.model
    best = scipy.optimize.minimize(
        lambda u: -_log_evidence(model, math.exp(u[0]), math.exp(u[1])), [0.0, 0.0],
        method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 5000},
    )  # fmt: skip
    delta, sigma = np.exp(best.x)
    mode = _ridge_mode(model, delta, sigma)
    curv = ggn.curvature("numpyro", model.spec, mode, model.x, model.y)
    tuned = ggn.tune(curv, 1.0, 1.0, tune_noise=True)
    np.testing.assert_allclose(tuned.prior_precision, [delta], rtol=1e-3)
    np.testing.assert_allclose(tuned.noise_std, sigma, rtol=1e-4)
    np.testing.assert_allclose(tuned.log_marginal_likelihood, -best.fun, atol=1e-6)


def test_a_fit_is_centred_on_the_map_with_the_exact_covariance(problem):
    result = fit(
        problem.model, "laplace", seed=0, num_steps=3000, learning_rate=0.05,
        prior_precision=1.0, num_draws=4000,
    )  # fmt: skip
    summary = result.info["laplace"]
    assert summary["hessian"] == "ggn" and summary["structure"] == "full"
    assert summary["prior_precision"] == 1.0 and summary["tuned"] == []
    assert summary["noise_std"] == 1.0 and summary["predictive"] == "glm"
    np.testing.assert_allclose(
        summary["log_marginal_likelihood"], _log_evidence(problem.model, 1.0, 1.0), atol=1e-3
    )
    draws = flat_draws(result.draws)[0]
    # 4000 independent draws: the mean within 4 standard errors (plus the MAP's 0.01), the
    # covariance entries within 4 standard errors sqrt((s_ii s_jj + s_ij^2) / n).
    se = np.sqrt(np.diag(problem.cov) / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - problem.mean) < 4 * se + 0.01)
    cov = problem.cov
    se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / len(draws))
    assert np.all(np.abs(np.cov(draws.T) - cov) < 4 * se_cov)


# --- the GGN on small networks -------------------------------------------------------------------


def _tiny(likelihood: str, seed: int = 0) -> tuple[BNN, dict[str, np.ndarray]]:
    """A 2-4-3-out tanh network (3 classes, or regression) and random weights."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(23, 2))
    if likelihood == "categorical":
        model = BNN(x, rng.integers(0, 3, size=23), hidden=(4, 3), likelihood="categorical",
                    num_classes=3)  # fmt: skip
    else:
        model = BNN(x, np.sin(x[:, 0]), hidden=(4, 3), noise=0.3)
    params = {
        s.name: rng.normal(scale=0.8, size=s.shape).astype(np.float32) for s in model.spec.sites()
    }
    return model, params


def _numpy_forward(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    h = x
    for i in range(3):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        h = np.tanh(h) if i < 2 else h
    return h


@pytest.mark.parametrize("likelihood", ["categorical", "gaussian"])
def test_the_ggn_is_psd_and_matches_a_finite_difference_jacobian(likelihood):
    model, params = _tiny(likelihood)
    curv = ggn.curvature("numpyro", model.spec, params, model.x, model.y)
    theta = curv.mean
    eps = 1e-6
    columns = []
    for p in range(theta.size):
        step = np.zeros_like(theta)
        step[p] = eps
        up = _numpy_forward(curv.layout.unflatten(theta + step), model.x)
        down = _numpy_forward(curv.layout.unflatten(theta - step), model.x)
        columns.append((up - down) / (2 * eps))
    jac = np.stack(columns, axis=-1)  # (n, out, P), float64
    f = _numpy_forward(curv.layout.unflatten(theta), model.x)
    if likelihood == "categorical":
        p = scipy.special.softmax(f, axis=1)
        lam = np.einsum("no,oq->noq", p, np.eye(3)) - np.einsum("no,nq->noq", p, p)
    else:
        lam = np.ones((len(f), 1, 1))  # per unit noise precision
    direct = np.einsum("nop,noq,nqr->pr", jac, lam, jac)
    np.testing.assert_allclose(curv.ggn, direct, rtol=1e-4, atol=1e-5 * np.abs(direct).max())
    assert np.linalg.eigvalsh(curv.ggn).min() > -1e-8 * np.abs(direct).max()
    if likelihood == "categorical":
        logp = f - scipy.special.logsumexp(f, axis=1, keepdims=True)
        np.testing.assert_allclose(curv.log_lik, logp[np.arange(23), model.y].sum(), rtol=1e-5)
    else:
        np.testing.assert_allclose(curv.sum_squares, np.sum((model.y - f[:, 0]) ** 2), rtol=1e-5)


@pytest.mark.parametrize("likelihood", ["categorical", "gaussian"])
def test_both_backends_give_the_same_ggn_and_marginal_likelihood(likelihood):
    model, params = _tiny(likelihood, seed=1)
    curves = [
        ggn.curvature(b, model.spec, params, model.x, model.y, structure)
        for b in BACKENDS
        for structure in ("full", "diag", "last_layer")
    ]
    sigma = 0.3 if likelihood == "gaussian" else None
    for a, b in zip(curves[:3], curves[3:], strict=True):
        scale = np.abs(a.ggn).max()
        np.testing.assert_allclose(a.ggn, b.ggn, rtol=1e-5, atol=1e-6 * scale)
        np.testing.assert_allclose(
            a.log_marginal_likelihood([0.5, 2.0, 1.0][: a.num_groups], sigma),
            b.log_marginal_likelihood([0.5, 2.0, 1.0][: b.num_groups], sigma),
            rtol=1e-6,
        )


def test_both_backends_give_the_same_ggn_of_a_convolutional_net():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(12, 6, 6, 1))
    stack = [Conv2d(2, 3, padding="same", activation="relu"), MaxPool2d(2), Flatten(), Dense(3)]
    model = BNN(x, rng.integers(0, 3, 12), layers=stack, likelihood="categorical", num_classes=3)
    params = {s.name: rng.normal(size=s.shape).astype(np.float32) for s in model.spec.sites()}
    a, b = (ggn.curvature(bk, model.spec, params, model.x, model.y) for bk in BACKENDS)
    assert a.ggn.shape == (3 * 3 * 2 + 2 + 18 * 3 + 3,) * 2
    np.testing.assert_allclose(a.ggn, b.ggn, rtol=1e-5, atol=1e-6 * np.abs(a.ggn).max())


def test_diag_and_last_layer_are_blocks_of_the_full_ggn():
    model, params = _tiny("categorical", seed=2)
    full, diag, last = (
        ggn.curvature("numpyro", model.spec, params, model.x, model.y, s)
        for s in ("full", "diag", "last_layer")
    )
    np.testing.assert_allclose(diag.ggn, np.diag(full.ggn), rtol=1e-10, atol=1e-12)
    assert last.layout.names == ("w2", "b2") and last.layout.size == 3 * 3 + 3
    block = full.ggn[-12:, -12:]
    np.testing.assert_allclose(last.ggn, block, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(full.groups, np.repeat([0, 1, 2], [2 * 4 + 4, 4 * 3 + 3, 12]))
    np.testing.assert_array_equal(last.groups, np.zeros(12))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dense_last_layer_ggn_is_built_from_its_kronecker_factors(backend):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(9, 5, 5, 1))
    stack = [Conv2d(2, 3, padding="same", activation="relu"), Flatten(), Dense(4)]
    model = BNN(x, rng.integers(0, 4, 9), layers=stack, likelihood="categorical", num_classes=4)
    params = {s.name: rng.normal(size=s.shape).astype(np.float32) for s in model.spec.sites()}
    op = ggn.jacobian_op(backend)
    last = ggn.laplace_sites(model.spec, "last_layer")
    f, jac = (np.asarray(a, np.float64) for a in op(model.spec, params, model.x, last))
    features = ggn._kronecker_features(jac)
    assert features is not None and features.shape == (9, 5 * 5 * 2 + 1)
    np.testing.assert_allclose(features[:, -1], 1.0)  # the bias's input
    general = ggn._ggn_batch(jac, f, "categorical", diag=False)
    np.testing.assert_allclose(
        ggn._ggn_batch_kronecker(features, f),
        general,
        rtol=1e-9,
        atol=1e-12 * np.abs(general).max(),
    )
    # Any other Jacobian (here every weight's) is summed in general.
    _, full = op(model.spec, params, model.x, ggn.laplace_sites(model.spec, "full"))
    assert ggn._kronecker_features(np.asarray(full, np.float64)) is None


def test_a_last_layer_ggn_summed_over_many_batches_and_chunks_is_the_full_ggns_block(monkeypatch):
    model, params = _tiny("categorical", seed=4)
    full = ggn.curvature("numpyro", model.spec, params, model.x, model.y, "full")
    # Batches of 2 points (23 points: the last one padded), features flushed every 5 points.
    monkeypatch.setattr(ggn, "_BATCH_FLOATS", 2 * 3 * 12)
    monkeypatch.setattr(ggn, "_KRONECKER_ROWS", 5)
    last = ggn.curvature("numpyro", model.spec, params, model.x, model.y, "last_layer")
    # float32 Jacobians, compiled for another batch size: equal to float32 rounding.
    np.testing.assert_allclose(last.ggn, full.ggn[-12:, -12:], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("structure", ["full", "diag"])
@pytest.mark.parametrize("groups", [1, 3])
def test_the_marginal_likelihood_gradient_is_exact(structure, groups):
    model, params = _tiny("gaussian", seed=3)
    curv = ggn.curvature("numpyro", model.spec, params, model.x, model.y, structure)
    objective = _Objective(curv, shared=groups == 1)
    log_delta = np.log([0.7, 1.9, 0.4][:groups])
    expand = np.repeat if groups == 1 else lambda v, _: v
    _, d_delta, d_sigma = objective.value(log_delta, 0.4)
    assert d_delta.shape == (groups,)

    def value(ld, log_sigma):
        return curv.log_marginal_likelihood(np.exp(expand(ld, 3)), math.exp(log_sigma))

    h = 1e-6
    for k in range(groups):
        up, down = log_delta.copy(), log_delta.copy()
        up[k] += h
        down[k] -= h
        numeric = (value(up, math.log(0.4)) - value(down, math.log(0.4))) / (2 * h)
        np.testing.assert_allclose(d_delta[k], numeric, rtol=1e-5, atol=1e-6)
    numeric = (value(log_delta, math.log(0.4) + h) - value(log_delta, math.log(0.4) - h)) / (2 * h)
    np.testing.assert_allclose(d_sigma, numeric, rtol=1e-5)


@pytest.mark.parametrize("structure", ["full", "diag"])
def test_draws_have_the_inverse_precision_as_covariance(structure):
    model, params = _tiny("categorical", seed=4)
    curv = ggn.curvature("numpyro", model.spec, params, model.x, model.y, "last_layer")
    if structure == "diag":
        curv = ggn.curvature("numpyro", model.spec, params, model.x, model.y, "diag")
    h = curv.precision(2.0)
    cov = np.diag(1 / h) if h.ndim == 1 else np.linalg.inv(h)
    draws = ggn.sample(curv, 2.0, None, np.random.default_rng(0), 40_000)
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / len(draws))
    assert np.all(np.abs(np.cov(draws.T) - cov) < 5 * se)
    assert np.all(np.abs(draws.mean(axis=0) - curv.mean) < 5 * np.sqrt(np.diag(cov) / len(draws)))


# --- the method ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def regression() -> BNN:
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(30, 1))
    return BNN(x, np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=30), hidden=(6,), noise="learned")


def _run(model: BNN, backend: str = "pyro", **options):
    opts = laplace.LaplaceOptions(**{"num_steps": 300, "learning_rate": 0.05, **options})
    return laplace.run("laplace", Target.build(backend, model), opts, 0)


def test_glm_draws_are_linearised_at_the_map_and_last_layer_fixes_the_rest(regression):
    out = _run(regression, structure="last_layer", num_draws=50)
    mode = out.linearised_at
    assert set(mode) == {"w0", "b0", "w1", "b1", "precision"}
    for name in ("w0", "b0"):  # fixed at the mode
        assert np.all(out.draws[name][0] == mode[name])
    assert np.all(out.draws["w1"][0].std(axis=0) > 0)
    noise = out.info["laplace"]["noise_std"]
    np.testing.assert_allclose(out.draws["precision"][0], noise**-2, rtol=1e-6)
    np.testing.assert_allclose(mode["precision"], noise**-2, rtol=1e-6)
    assert out.info["laplace"]["tuned"] == ["prior_precision", "noise_std"]
    assert _run(regression, predictive="sampled", num_draws=5).linearised_at is None


def test_tuning_raises_the_marginal_likelihood_and_known_noise_stays(regression):
    fixed = _run(regression, prior_precision="prior", tune_noise=False, num_draws=5)
    tuned = _run(regression, prior_precision_per_layer=True, num_draws=5)
    a, b = fixed.info["laplace"], tuned.info["laplace"]
    assert a["prior_precision"] == 1.0 and a["tuned"] == []
    assert len(b["prior_precision"]) == 2
    assert b["log_marginal_likelihood"] > a["log_marginal_likelihood"]
    # Without tuning the noise is the MAP fit's.
    np.testing.assert_allclose(a["noise_std"], fixed.linearised_at["precision"] ** -0.5, rtol=1e-6)
    assert a["map_noise_std"] == a["noise_std"] != b["noise_std"]
    np.testing.assert_allclose(b["map_noise_std"], a["map_noise_std"], rtol=1e-6)  # same mode
    known = BNN(regression.x, regression.y, hidden=(6,), noise=0.2)
    assert _run(known, num_draws=5).info["laplace"]["noise_std"] == 0.2


def test_the_full_hessian_keeps_the_autoguide(problem):
    out = _run(problem.model, hessian="full", num_draws=5)
    assert out.info["laplace"] == {"hessian": "full", "predictive": "sampled"}
    assert out.info["guide"] == "AutoLaplaceApproximation" and out.linearised_at is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"hessian": "exact"}, r"unknown hessian 'exact'; available: ggn, full"),
        ({"structure": "kron"}, r"unknown structure 'kron'; available: full, diag, last_layer"),
        ({"predictive": "probit"}, r"unknown predictive 'probit'; available: glm, sampled"),
        ({"prior_precision": 0.0}, r"prior_precision must be a finite number > 0, got 0.0"),
        ({"prior_precision": -1}, r"prior_precision must be a finite number > 0"),
        ({"prior_precision": float("nan")}, r"prior_precision must be a finite number > 0"),
        ({"prior_precision": True}, r"prior_precision must be a finite number > 0"),
        ({"prior_precision": "evidence"}, r"unknown prior_precision 'evidence'; available: marg"),
        ({"prior_precision": 2.0, "prior_precision_per_layer": True}, r"needs prior_precision="),
        ({"prior_precision_per_layer": 1}, r"prior_precision_per_layer must be True or False"),
        ({"tune_noise": "yes"}, r"tune_noise must be True or False"),
        ({"hessian": "full", "structure": "diag"}, r"structure applies to hessian='ggn' only"),
        ({"hessian": "full", "prior_precision": 1.0}, r"prior_precision applies to hessian='g"),
        ({"hessian": "full", "predictive": "glm"}, r"predictive='glm' applies to hessian='ggn'"),
        ({"kl_weight": 0.5}, r"GGN Laplace approximates the posterior itself: kl_weight must"),
        ({"num_draws": 0}, r"num_draws must be an integer >= 1"),
    ],
)
def test_bad_options_are_named(problem, options, message):
    with pytest.raises(ValueError, match=message):
        fit(problem.model, "laplace", num_steps=5, **options)


def test_impossible_settings_fail_before_the_map_fit():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 60))
    wide = BNN(x, x[:, 0], hidden=(200,), noise=0.1)  # 12,401 weights
    with pytest.raises(ValueError, match=r"12401 weights is a 12401 x 12401 matrix.*'last_l"):
        fit(wide, "laplace", num_steps=5)
    mixture = BNN(x[:, :2], x[:, 0], hidden=(3,), noise=0.1,
                  prior=priors.ScaleMixture(0.5, 1.0, 0.1))  # fmt: skip
    with pytest.raises(ValueError, match=r"prior_precision='prior' needs Normal priors.*layer 0"):
        fit(mixture, "laplace", num_steps=5, prior_precision="prior")
    with pytest.raises(ValueError, match=r"tune_noise applies to the gaussian likelihood only"):
        model, params = _tiny("categorical")
        ggn.tune(ggn.curvature("numpyro", model.spec, params, model.x, model.y, "diag"), 1.0,
                 tune_noise=True)  # fmt: skip


def test_extreme_values_in_the_tuning_keep_the_objective_finite():
    # 31 weights, 23 points: G is rank-deficient, and at delta 1e-8, sigma 1e-8 (where
    # L-BFGS-B's first step can land) G / (sigma^2 delta) is rounded past a Cholesky factor.
    model, params = _tiny("gaussian", seed=6)
    curv = ggn.curvature("numpyro", model.spec, params, model.x, model.y)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(curv.precision([1e-8, 3e-5, 1.0], 1e-8))
    value, d_delta, d_sigma = _Objective(curv).value(np.log([1e-8, 3e-5, 1.0]), 1e-8)
    assert np.isfinite(value) and np.all(np.isfinite(d_delta)) and np.isfinite(d_sigma)
    tuned = ggn.tune(curv, [1e-8, 3e-5, 1.0], 1e-8, per_layer=True, tune_noise=True)
    assert tuned.log_marginal_likelihood > value and np.isfinite(tuned.log_marginal_likelihood)
    draws = ggn.sample(curv, [1e-8, 3e-5, 1.0], 1e-8, np.random.default_rng(0), 10)
    assert np.all(np.isfinite(draws))
