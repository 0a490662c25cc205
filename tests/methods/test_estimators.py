"""``svi``'s gradient estimators (reparam, local reparameterisation, Flipout) on both backends:
the same expected gradient with lower variance, the KL, backend parity, the closed-form mean-field
optimum of Bayesian linear regression, errors, and an end-to-end fit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.meanfield import closed_form_kl, monte_carlo_kl
from ppl_bnn.methods.svi import SVIOptions
from ppl_bnn.model.estimators import ESTIMATORS, linear_map
from ppl_bnn.model.layers import Dense
from ppl_bnn.model.priors import Horseshoe, Normal
from tests.closed_form import linear_problem

pytestmark = pytest.mark.runtime(110)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = backend_names()
PER_EXAMPLE = ["local_reparam", "flipout"]


@dataclass(frozen=True)
class Laplace:
    """A zero-mean Laplace prior: a non-Normal prior, so its KL is estimated by Monte Carlo."""

    scale: float
    positive = False
    learned = False

    def distribution(self, ppl: Any, shape: tuple[int, ...]) -> Any:
        return ppl.dist.Laplace(0.0, self.scale).expand(list(shape)).to_event(len(shape))

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.laplace(0.0, self.scale, size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return value

    def log_density_unconstrained(self, z: Any, exp: Any, log: Any) -> Any:
        n = math.prod(z.shape)
        return -abs(z).sum() / self.scale - n * math.log(2 * self.scale)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "laplace", "scale": self.scale}


def _regression(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    return x, np.tanh(x @ rng.normal(size=d)) + 0.1 * rng.normal(size=n)


def _guide(model: BNN, scale: float, seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    loc = {s.name: (0.5 * rng.normal(size=s.shape)).astype(np.float32) for s in model.spec.sites()}
    std = {s.name: np.full(s.shape, scale, dtype=np.float32) for s in model.spec.sites()}
    return loc, std


def _options(estimator: str, **extra: Any) -> SVIOptions:
    return SVIOptions(estimator=estimator, **extra)


def _gradients(
    backend: str, model: BNN, estimator: str, loc: dict, std: dict, num: int, seed: int
) -> dict[str, np.ndarray]:
    """``num`` independent draws of the negative ELBO's gradient with respect to the guide's
    means and stds of ``w0``: ``{"loc": (num, ...), "scale": (num, ...)}``."""
    target = Target.build(backend, model)
    rho = {k: np.log(np.expm1(v.astype(np.float64))).astype(np.float32) for k, v in std.items()}
    if backend == "numpyro":
        import jax
        import jax.numpy as jnp

        from ppl_bnn.backends.numpyro.meanfield import KeyNoise, loss_fn

        loss = loss_fn(target, _options(estimator))
        params = {
            "loc": {k: jnp.asarray(v) for k, v in loc.items()},
            "rho": {k: jnp.asarray(v) for k, v in rho.items()},
        }
        keys = jax.random.split(jax.random.PRNGKey(seed), num)

        def keyed(p, key, x, y, c):
            return loss(p, KeyNoise(key), x, y, c)

        grad = jax.jit(jax.vmap(jax.grad(keyed), in_axes=(None, 0, None, None, None)))
        grads = grad(params, keys, target.x, target.y, 1.0)
        g_loc, g_rho = np.asarray(grads["loc"]["w0"]), np.asarray(grads["rho"]["w0"])
    else:
        import torch

        from ppl_bnn.backends.pyro.meanfield import GeneratorNoise, loss_fn

        loss = loss_fn(target, _options(estimator))
        loc_t = {k: torch.tensor(v, requires_grad=True) for k, v in loc.items()}
        rho_t = {k: torch.tensor(v, requires_grad=True) for k, v in rho.items()}
        noise = GeneratorNoise(seed)
        g_loc, g_rho = np.empty((num, *loc["w0"].shape)), np.empty((num, *loc["w0"].shape))
        for i in range(num):
            value = loss(loc_t, rho_t, noise, target.x, target.y, 1.0)
            g_loc[i], g_rho[i] = (
                g.numpy() for g in torch.autograd.grad(value, [loc_t["w0"], rho_t["w0"]])
            )
    # d/d sigma = d/d rho / softplus'(rho), softplus' = sigmoid
    sigmoid = 1.0 / (1.0 + np.exp(-rho["w0"].astype(np.float64)))
    return {"loc": g_loc, "scale": g_rho / sigmoid}


@pytest.fixture(scope="module")
def variance_setting() -> tuple[BNN, dict, dict]:
    """A minibatch of 64 examples through a 3-8-1 tanh network, the guide's stds at 0.5 (wide
    enough that a weight draw shared by the minibatch dominates the gradient noise)."""
    x, y = _regression(64, 3, seed=0)
    model = BNN(x, y, hidden=(8,), noise=0.3)
    loc, std = _guide(model, scale=0.5, seed=1)
    return model, loc, std


NUM_GRADIENTS = {"numpyro": 2000, "pyro": 300}


@pytest.fixture(scope="module", params=BACKENDS)
def gradient_draws(request, variance_setting) -> dict[str, dict[str, np.ndarray]]:
    backend = request.param
    model, loc, std = variance_setting
    num = NUM_GRADIENTS[backend]
    return {
        est: _gradients(backend, model, est, loc, std, num, seed=10 + i)
        for i, est in enumerate(ESTIMATORS)
    }


@pytest.mark.parametrize("estimator", PER_EXAMPLE)
def test_estimators_have_the_same_expected_gradient(gradient_draws, estimator):
    """The mean gradient with respect to w0's means and stds agrees with reparam's, elementwise,
    within 5 standard errors of the difference (48 elements; fixed seeds)."""
    for kind in ("loc", "scale"):
        a, b = gradient_draws["reparam"][kind], gradient_draws[estimator][kind]
        se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b))
        z = (a.mean(axis=0) - b.mean(axis=0)) / se
        assert np.max(np.abs(z)) < 5, f"{kind}: largest z {np.max(np.abs(z)):.1f}"


@pytest.mark.parametrize("estimator", PER_EXAMPLE)
def test_per_example_estimators_lower_the_gradient_variance(gradient_draws, estimator):
    """Summed over w0's elements, the per-draw gradient variance falls well below reparam's
    (the variance estimates' own relative error is a few percent at these sample sizes)."""
    for kind in ("loc", "scale"):
        reparam = gradient_draws["reparam"][kind].var(axis=0).sum()
        other = gradient_draws[estimator][kind].var(axis=0).sum()
        assert other < 0.5 * reparam, f"{kind}: {other:.3g} vs reparam {reparam:.3g}"


@pytest.mark.parametrize(
    "prior",
    [Normal(0.7), Horseshoe().given({"tau": np.array(0.8), "lambda": np.array([0.5, 2.0])})],
    ids=["normal", "horseshoe-given-its-scales"],
)
def test_closed_form_kl_matches_monte_carlo(prior):
    """KL(N(m, s^2) || N(0, p^2)) in closed form against the mean of log q - log p at 20,000
    draws, within 4 standard errors: for a Normal prior, and for the horseshoe's conditional
    prior at fixed scales (one per unit, broadcast over the inputs)."""
    rng = np.random.default_rng(5)
    loc, scale = rng.normal(size=(3, 2)), rng.uniform(0.2, 1.5, size=(3, 2))
    exact = closed_form_kl(prior, loc, scale, np)
    draws = np.array(
        [
            monte_carlo_kl(prior, loc, scale, loc + scale * rng.normal(size=loc.shape), np)
            for _ in range(20_000)
        ]
    )
    se = draws.std(ddof=1) / np.sqrt(len(draws))
    assert abs(draws.mean() - exact) < 4 * se
    assert closed_form_kl(Laplace(1.0), loc, scale, np) is None


class _FixedNoise:
    """The same standard draws on every backend: numpy's, converted by ``asarray``."""

    def __init__(self, seed: int, asarray: Any) -> None:
        self.rng, self.asarray = np.random.default_rng(seed), asarray

    def normal(self, shape: tuple[int, ...]) -> Any:
        return self.asarray(self.rng.standard_normal(shape).astype(np.float32))

    def rademacher(self, shape: tuple[int, ...]) -> Any:
        signs = 2.0 * self.rng.integers(0, 2, size=shape) - 1.0
        return self.asarray(signs.astype(np.float32))


def _loss_with_noise(backend: str, model: BNN, estimator: str, loc: dict, std: dict) -> float:
    target = Target.build(backend, model)
    rho = {k: np.log(np.expm1(v.astype(np.float64))).astype(np.float32) for k, v in std.items()}
    if backend == "numpyro":
        import jax.numpy as jnp

        from ppl_bnn.backends.numpyro.meanfield import loss_fn

        loss = loss_fn(target, _options(estimator, num_particles=2))
        params = {
            "loc": {k: jnp.asarray(v) for k, v in loc.items()},
            "rho": {k: jnp.asarray(v) for k, v in rho.items()},
        }
        return float(loss(params, _FixedNoise(3, jnp.asarray), target.x, target.y, 2.5))
    import torch

    from ppl_bnn.backends.pyro.meanfield import loss_fn

    loss = loss_fn(target, _options(estimator, num_particles=2))
    loc_t = {k: torch.tensor(v) for k, v in loc.items()}
    rho_t = {k: torch.tensor(v) for k, v in rho.items()}
    noise = _FixedNoise(3, torch.from_numpy)
    with torch.no_grad():
        return float(loss(loc_t, rho_t, noise, target.x, target.y, 2.5))


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize(
    "prior", [Normal(1.0), Laplace(0.5), Horseshoe()], ids=["normal", "laplace", "horseshoe"]
)
def test_backends_give_the_same_elbo_for_the_same_noise(estimator, prior):
    """Identical guide, data and standard draws: identical negative ELBO on Pyro and NumPyro,
    with a learned noise (a Monte Carlo KL on the precision) and for a Normal (closed-form KL),
    a Laplace prior (Monte Carlo KL at the estimator's or an extra draw) and a horseshoe (its
    scales' Monte Carlo KL, the weights' in closed form given the scales' draws)."""
    x, y = _regression(12, 2, seed=4)
    model = BNN(x, y, hidden=(5,), noise="learned", prior=prior)
    loc, std = _guide(model, scale=0.3, seed=2)
    values = [_loss_with_noise(b, model, estimator, loc, std) for b in BACKENDS]
    assert np.isfinite(values[0])
    np.testing.assert_allclose(values[0], values[1], rtol=2e-5)


@pytest.fixture(scope="module")
def correlated():
    """Bayesian linear regression with correlated inputs: the mean-field optimum's stds
    (1 / sqrt of the precision's diagonal) lie well below the posterior's for the weights."""
    problem = linear_problem(correlation=0.6)
    assert np.all(problem.mean_field_std[:2] < 0.85 * problem.std[:2])
    return problem


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_fit_reaches_the_closed_form_mean_field_optimum(correlated, estimator, backend):
    """The mean-field optimum of a Gaussian posterior has the posterior mean as its means and
    the precision's diagonal as its precisions; every estimator reaches it on both backends."""
    result = fit(
        correlated.model,
        "svi",
        backend=backend,
        seed=6,
        estimator=estimator,
        num_steps=3000,
        learning_rate=0.005,
        num_particles=4,
        num_draws=10,
    )
    loc = np.concatenate([result.variational["loc"]["w0"][:, 0], result.variational["loc"]["b0"]])
    std = np.concatenate(
        [result.variational["scale"]["w0"][:, 0], result.variational["scale"]["b0"]]
    )
    np.testing.assert_allclose(loc, correlated.mean, atol=0.05)
    np.testing.assert_allclose(np.log(std), np.log(correlated.mean_field_std), atol=0.1)
    assert result.options["estimator"] == estimator


@pytest.fixture(scope="module")
def tiny() -> BNN:
    x, y = _regression(20, 2, seed=8)
    return BNN(x, y, hidden=(3,), noise="learned")


def test_unknown_estimator_is_named(tiny):
    with pytest.raises(ValueError, match=r"unknown estimator 'bogus'; available: reparam"):
        fit(tiny, "svi", estimator="bogus", num_steps=5)


@pytest.mark.parametrize("method", ["lowrank", "fullrank"])
def test_per_example_estimators_need_the_mean_field_guide(tiny, method):
    with pytest.raises(ValueError, match=r"estimator 'flipout' .* needs the mean-field guide"):
        fit(tiny, method, estimator="flipout", num_steps=5)


def test_per_example_estimators_refuse_pyros_svi_step(tiny):
    with pytest.raises(ValueError, match=r"drop update='pyro'"):
        fit(tiny, "svi", backend="pyro", estimator="local_reparam", update="pyro", num_steps=5)


@pytest.mark.parametrize("method", ["map", "laplace", "nuts", "sgld"])
def test_methods_without_an_estimator_refuse_it(tiny, method):
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'estimator'"):
        fit(tiny, method, estimator="local_reparam")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("estimator", PER_EXAMPLE)
def test_fit_predict_save_load(tiny, estimator, backend, tmp_path):
    """A minibatch fit looks like any svi result: draws of every site, the guide, the losses,
    timings with compilation apart; it predicts, saves and loads; the same seed repeats it."""
    kwargs = {"estimator": estimator, "num_steps": 40, "num_draws": 6, "batch_size": 5}
    result = fit(tiny, "svi", backend=backend, seed=3, **kwargs)
    again = fit(tiny, "svi", backend=backend, seed=3, **kwargs)
    assert result.info["estimator"] == estimator and result.info["batch_size"] == 5
    assert set(result.draws) == {s.name for s in tiny.spec.sites()}
    assert result.draws["w0"].shape == (1, 6, 2, 3)
    assert np.all(result.draws["precision"] > 0)
    assert result.losses.shape == (40,) and np.all(np.isfinite(result.losses))
    assert set(result.variational) == {"loc", "scale"}
    assert {"compile", "warmup", "sampling"} <= set(result.timings)
    for name in result.draws:
        np.testing.assert_array_equal(result.draws[name], again.draws[name])
    x_new = np.linspace(-1, 1, 4)[:, None].repeat(2, axis=1)
    prediction = result.predict(x_new)
    assert prediction.mean.shape == (4,)
    loaded = FitResult.load(result.save(tmp_path / "fit"))
    assert loaded.options == result.options and loaded.info == result.info
    np.testing.assert_array_equal(loaded.predict(x_new).mean, prediction.mean)


def test_reparam_keeps_the_autoguide_path(tiny):
    """``estimator="reparam"`` (the default) is the library's AutoNormal, draw for draw."""
    default = fit(tiny, "svi", seed=2, num_steps=20, num_draws=4)
    named = fit(tiny, "svi", seed=2, num_steps=20, num_draws=4, estimator="reparam")
    assert default.info["guide"] == "AutoNormal" and default.options["estimator"] == "reparam"
    np.testing.assert_array_equal(default.draws["w0"], named.draws["w0"])


@pytest.mark.parametrize("estimator", PER_EXAMPLE)
def test_a_breakdown_stops_the_fit_alike_on_both_backends(estimator):
    """An input of 1e30 overflows the network: the same DivergedError, step and cause on both
    backends (:mod:`ppl_bnn.methods.divergence`)."""
    x, y = _regression(12, 1, seed=9)
    x[0, 0] = 1e30
    model = BNN(x, y, hidden=(20,), activation="relu", noise=0.1)
    errors = []
    for backend in BACKENDS:
        with pytest.raises(DivergedError, match=r"^SVI diverged at step \d+") as info:
            fit(model, "svi", backend=backend, estimator=estimator, num_steps=10, num_draws=2)
        errors.append(info.value)
    assert errors[0].step == errors[1].step
    assert errors[0].cause == errors[1].cause == "inputs of magnitude 1e30 in x: standardise them"


class _Unknown:
    """A parametrised layer kind with no rule for the per-example estimators."""


def test_a_layer_kind_without_a_linear_map_is_refused():
    assert linear_map(Dense(3), "reparam") is None
    assert linear_map(Dense(3), "flipout") is not None
    with pytest.raises(ValueError, match=r"estimator 'flipout' has no rule for layer _Unknown"):
        linear_map(_Unknown(), "flipout")


def _conv_model(n: int, seed: int) -> BNN:
    """A small image regression: 5x6 one-channel images through Conv2d(3, 3, 'same', tanh),
    average pooling, Flatten and Dense(1)."""
    from ppl_bnn.layers import AvgPool2d, Conv2d, Flatten

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5, 6, 1))
    y = np.tanh(x.mean(axis=(1, 2, 3)) * 3) + 0.1 * rng.normal(size=n)
    layers = [Conv2d(3, 3, padding="same", activation="tanh"), AvgPool2d(2), Flatten(), Dense(1)]
    return BNN(x, y, layers=layers, noise=0.3)


@pytest.mark.parametrize("estimator", ["reparam", "flipout"])
def test_conv_layers_give_the_same_elbo_on_both_backends_for_the_same_noise(estimator):
    """Identical guide, images and standard draws: identical negative ELBO on Pyro and NumPyro
    through a convolution (Flipout's signs per example and channel)."""
    model = _conv_model(6, seed=7)
    loc, std = _guide(model, scale=0.3, seed=8)
    values = [_loss_with_noise(b, model, estimator, loc, std) for b in BACKENDS]
    assert np.isfinite(values[0])
    np.testing.assert_allclose(values[0], values[1], rtol=2e-5)


def test_flipout_on_a_convolution_is_unbiased_and_lowers_the_variance():
    """On the convolution's kernel: Flipout's mean gradient agrees with reparam's within 5
    standard errors elementwise, and its summed per-draw variance is lower."""
    model = _conv_model(32, seed=9)
    loc, std = _guide(model, scale=0.5, seed=10)
    draws = {
        est: _gradients("numpyro", model, est, loc, std, 2000, seed=20 + i)
        for i, est in enumerate(("reparam", "flipout"))
    }
    for kind in ("loc", "scale"):
        a, b = draws["reparam"][kind], draws["flipout"][kind]
        se = np.sqrt(a.var(axis=0, ddof=1) / len(a) + b.var(axis=0, ddof=1) / len(b))
        z = (a.mean(axis=0) - b.mean(axis=0)) / se
        assert np.max(np.abs(z)) < 5, f"{kind}: largest z {np.max(np.abs(z)):.1f}"
        assert b.var(axis=0).sum() < 0.8 * a.var(axis=0).sum(), kind


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_reparam_on_a_convolution_is_refused_before_any_work(backend):
    """Sampling a convolution's outputs independently per position ignores that they share
    weights: the gradient is then biased (z up to 5 on the kernel's stds in 2,000 draws)."""
    with pytest.raises(ValueError, match=r"'local_reparam' is not exact for layer Conv2d.*flipout"):
        fit(_conv_model(4, seed=1), "svi", backend=backend, estimator="local_reparam")


def test_a_learned_prior_needs_the_reparam_estimator():
    from ppl_bnn.priors import ScaleMixture

    x, y = _regression(8, 2, seed=3)
    model = BNN(x, y, hidden=(3,), noise=0.3, prior=ScaleMixture(learned=True))
    with pytest.raises(ValueError, match=r"estimator 'flipout' does not fit a learned prior"):
        fit(model, "svi", backend="numpyro", estimator="flipout")
