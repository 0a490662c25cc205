"""One rule for numerical breakdowns (:mod:`ppl_bnn.methods.divergence`): the same breakdown stops
a fit with the same ``DivergedError`` on both backends (method, step, likely cause, message
shape), a log density that is not finite anywhere names its cause, and a method that keeps
finite draws returns them marked diverged, with the same ``info`` keys on both backends."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import DivergedError, Method, RunOutput
from ppl_bnn.methods.divergence import diverged
from tests.closed_form import linear_problem

BACKENDS = backend_names()
OPTIONS = {
    "svi": {"num_steps": 30, "num_draws": 5},
    "map": {"num_steps": 30},
    "laplace": {"num_steps": 30, "num_draws": 5},
    "ensemble": {"num_steps": 30, "num_members": 2},
    "sgld": {"num_burnin": 10, "num_samples": 5, "thinning": 2},
    "sghmc": {"num_burnin": 10, "num_samples": 5, "thinning": 2},
}
DIVERGENCE_KEYS = {"diverged", "diverged_at_step", "diverged_sites", "diverged_cause"}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(12, 1))
    return x, np.sin(3 * x[:, 0])


@pytest.fixture(scope="module")
def huge_inputs(data: tuple[np.ndarray, np.ndarray]) -> BNN:
    """One input of 1e30 through 20 ReLU units: the network's output overflows float32."""
    x, y = data
    x = x.copy()
    x[0, 0] = 1e30
    return BNN(x, y, hidden=(20,), activation="relu", noise=0.1)


def _shape(err: DivergedError) -> str:
    """The message without what differs between libraries' numbers: sites and step counts."""
    return re.sub(r"\d+", "N", re.sub(r" in site\(s\) [\w, ]+", "", str(err)))


def _both(model: BNN, method: str, match: str, **options: object) -> list[DivergedError]:
    errors = []
    for backend in BACKENDS:
        with pytest.raises(DivergedError, match=match) as info:
            fit(model, method, backend=backend, seed=0, **options)
        errors.append(info.value)
    return errors


@pytest.mark.parametrize("method", ["svi", "map", "laplace", "ensemble", "sgld"])
def test_huge_inputs_stop_the_fit_alike_on_both_backends(huge_inputs: BNN, method: str) -> None:
    match = rf"^{method.upper()} diverged .*; likely cause: inputs of magnitude 1e30 in x"
    numpyro, pyro = _both(huge_inputs, method, match, **OPTIONS[method])
    assert numpyro.method == pyro.method == method
    assert numpyro.step == pyro.step
    assert numpyro.cause == pyro.cause == "inputs of magnitude 1e30 in x: standardise them"
    assert _shape(numpyro) == _shape(pyro)


def test_learning_rate_too_large_stops_svi_alike_on_both_backends(data) -> None:
    model = BNN(*data, hidden=(3,), activation="relu", noise=0.1)
    match = (
        r"^SVI diverged at step \d+( in site\(s\) [\w, ]+)?: the loss became non-finite; "
        r"likely cause: learning rate too large \(learning_rate=10000\)"
    )
    numpyro, pyro = _both(model, "svi", match, learning_rate=1e4, **OPTIONS["svi"])
    assert isinstance(numpyro.step, int) and isinstance(pyro.step, int)
    assert numpyro.cause == pyro.cause
    assert _shape(numpyro) == _shape(pyro)
    assert numpyro.details().keys() == pyro.details().keys() == DIVERGENCE_KEYS


@pytest.mark.parametrize(
    ("method", "backend", "options"),
    [
        ("nuts", "numpyro", {}),
        ("nuts", "pyro", {"potential": "traced"}),
        ("nuts", "pyro", {"potential": "pyro"}),
        ("hmc", "numpyro", {"num_steps": 3}),
        ("hmc", "pyro", {"potential": "eager", "num_steps": 3}),
    ],
)
def test_log_density_not_finite_anywhere_names_the_cause(
    data, method: str, backend: str, options: dict
) -> None:
    """A linear model on an input of 1e30: the squared residual overflows for every weight a
    sampler may start from, which the libraries only call "no valid initial parameters"."""
    x, y = data
    x = x.copy()
    x[0, 0] = 1e30
    model = BNN(x, y, hidden=(), noise=0.1)
    match = (
        rf"^{method.upper()} diverged: the log density or its gradient is not finite at any "
        r"starting point tried \(initialisation\); likely cause: inputs of magnitude 1e30 in x"
    )
    with pytest.raises(DivergedError, match=match) as info:
        fit(model, method, backend=backend, num_warmup=5, num_samples=5, **options)
    assert info.value.step is None


@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_sgmcmc_keeps_draws_before_a_divergence_marked_alike(method: str) -> None:
    # |1 - step * precision / 2| = 1.5: the chain grows geometrically until it overflows.
    problem = linear_problem()
    options = {"step_size": 0.122, "num_burnin": 0, "thinning": 1, "num_samples": 2000}
    if method == "sghmc":
        options["friction"] = 1.0
    infos = []
    for backend in BACKENDS:
        result = fit(problem.model, method, backend=backend, seed=0, **options)
        assert set(result.info) >= DIVERGENCE_KEYS
        assert result.info["diverged"] is True
        (step,) = result.info["diverged_at_step"]
        assert result.num_draws == step
        assert all(np.isfinite(v).all() for v in result.draws.values())
        infos.append(result.info)
    numpyro, pyro = infos
    assert numpyro["diverged_cause"] == pyro["diverged_cause"]
    assert (
        numpyro["diverged_cause"]
        == "step size too large (step_size=0.122): try a smaller step_size"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_ensemble_returns_the_members_that_stayed_finite(
    data, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second of three members breaks down: the other two are the result, marked."""
    model = BNN(*data, hidden=(3,), noise=0.1)
    real_run_on = Method.run_on
    calls = []

    def run_on(self: Method, backend: str):
        run = real_run_on(self, backend)
        if self.name != "map":
            return run

        def second_diverges(name, target, options, seed) -> RunOutput:
            calls.append(seed)
            if len(calls) == 2:
                step_option = ("learning_rate", options.learning_rate)
                raise diverged(
                    "map", "the loss became non-finite", target.model, step=7, sites=["w0"],
                    step_option=step_option,
                )  # fmt: skip
            return run(name, target, options, seed)

        return second_diverges

    monkeypatch.setattr(Method, "run_on", run_on)
    result = fit(model, "ensemble", backend=backend, seed=0, num_steps=20, num_members=3)
    assert result.num_draws == 2
    assert result.losses.shape == (2, 20)
    assert all(np.isfinite(v).all() for v in result.draws.values())
    info = result.info
    assert (info["diverged"], info["diverged_at_step"]) == (True, [None, 7, None])
    assert (info["diverged_sites"], info["members_diverged"]) == (["w0"], 1)
    assert (
        info["diverged_cause"]
        == "learning rate too large (learning_rate=0.01): try a smaller learning_rate"
    )


def test_a_result_never_holds_non_finite_draws(data, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a runner returns, ``fit`` hands back finite draws or raises."""
    model = BNN(*data, hidden=(3,), noise=0.1)

    def nan_draws(self: Method, backend: str):
        def run(name, target, options, seed) -> RunOutput:
            draws = {s.name: np.zeros((1, 1, *s.shape), np.float32) for s in model.spec.sites()}
            draws["b1"][0, 0, 0] = np.nan
            return RunOutput(draws=draws, timings={})

        return run

    monkeypatch.setattr(Method, "run_on", nan_draws)
    with pytest.raises(DivergedError, match=r"^MAP diverged in site\(s\) b1: the draws are not"):
        fit(model, "map")


def test_a_plain_result_says_it_did_not_diverge(data) -> None:
    result = fit(BNN(*data, hidden=(3,), noise=0.1), "map", num_steps=5)
    assert result.info["diverged"] is False
