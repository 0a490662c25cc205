"""fit(): argument validation (fails before any inference runs) and FitResult.predict checks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, available_methods, fit
from ppl_bnn.engine.registry import backend_names, option_owners
from ppl_bnn.methods import METHODS, backend_options, get_method, make_options
from ppl_bnn.methods.base import backend_option, option_backends
from ppl_bnn.methods.nuts import NUTSOptions
from ppl_bnn.methods.sgld import SGLDOptions
from ppl_bnn.methods.svi import SVIOptions

BACKENDS = backend_names()


@pytest.fixture(scope="module")
def model() -> BNN:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(12, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=12)
    return BNN(x, y, hidden=(3,), noise=0.1)


@pytest.fixture(scope="module")
def fitted(model: BNN) -> FitResult:
    return fit(model, "svi", num_steps=5, num_draws=4, seed=0)


# --- available methods --------------------------------------------------------------------------


def test_available_methods() -> None:
    methods = available_methods()
    names = {"svi", "nuts", "hmc", "sgld", "map", "laplace", "lowrank", "fullrank", "ensemble"}
    assert names <= set(methods)
    for name in names:
        assert set(methods[name]) == set(BACKENDS) == {"numpyro", "pyro"}


# --- fit argument validation --------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_method(model: BNN, backend: str) -> None:
    with pytest.raises(ValueError, match="unknown method 'vi'") as info:
        fit(model, "vi", backend=backend)
    for name in ("svi", "nuts", "hmc", "sgld"):
        assert name in str(info.value)


def test_unknown_backend(model: BNN) -> None:
    with pytest.raises(ValueError, match="unknown backend 'stan'") as info:
        fit(model, "nuts", backend="stan")
    assert "numpyro" in str(info.value)
    assert "pyro" in str(info.value)


@pytest.mark.parametrize(
    ("method", "option", "listed"),
    [
        ("svi", "num_samples", ["num_steps", "learning_rate", "num_draws", "jit"]),
        ("nuts", "num_steps", ["num_warmup", "num_samples", "max_tree_depth", "target_accept"]),
        ("hmc", "max_tree_depth", ["num_warmup", "trajectory_length", "num_steps"]),
    ],
)
def test_unknown_option(model: BNN, method: str, option: str, listed: list[str]) -> None:
    with pytest.raises(ValueError, match=f"unknown option.*'{option}'.*{method}") as info:
        fit(model, method, **{option: 10})
    message = str(info.value)
    assert "valid options" in message
    for name in listed:
        assert name in message


def test_several_unknown_options_are_all_named(model: BNN) -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'lr', 'steps'"):
        fit(model, "svi", steps=10, lr=0.1)


@pytest.mark.parametrize(
    ("method", "options", "match"),
    [
        ("svi", {"num_steps": 0}, "num_steps must be an integer >= 1, got 0"),
        ("svi", {"num_steps": 2.5}, "num_steps must be an integer >= 1"),
        ("svi", {"learning_rate": -1}, "learning_rate must be a finite number > 0, got -1"),
        ("svi", {"learning_rate": float("nan")}, "learning_rate must be a finite number > 0"),
        ("svi", {"num_draws": 0}, "num_draws must be an integer >= 1"),
        ("svi", {"num_particles": True}, "num_particles must be an integer >= 1"),
        ("svi", {"init_scale": 0.0}, "init_scale must be a finite number > 0"),
        ("svi", {"jit": "yes"}, "jit must be True or False, got 'yes'"),
        ("nuts", {"target_accept": 1.5}, r"target_accept must be in \(0, 1\), got 1.5"),
        ("nuts", {"target_accept": 1.0}, r"target_accept must be in \(0, 1\)"),
        ("nuts", {"target_accept": 0.0}, "target_accept must be a finite number > 0"),
        ("nuts", {"num_chains": 0}, "num_chains must be an integer >= 1, got 0"),
        ("nuts", {"max_tree_depth": 0}, "max_tree_depth must be an integer >= 1, got 0"),
        ("nuts", {"num_warmup": -1}, "num_warmup must be an integer >= 0, got -1"),
        ("nuts", {"num_samples": 0}, "num_samples must be an integer >= 1"),
        ("nuts", {"step_size": -0.1}, "step_size must be a finite number > 0"),
        ("nuts", {"dense_mass": 1}, "dense_mass must be True or False"),
        ("hmc", {"num_chains": 0}, "num_chains must be an integer >= 1"),
        ("hmc", {"num_steps": 0}, "num_steps must be an integer >= 1"),
        ("hmc", {"trajectory_length": 0}, "trajectory_length must be a finite number > 0"),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_invalid_option_values(
    model: BNN, method: str, options: dict, match: str, backend: str
) -> None:
    with pytest.raises(ValueError, match=match):
        fit(model, method, backend=backend, **options)


@pytest.mark.parametrize(
    ("method", "options", "match"),
    [
        ("svi", {"update": "sgd"}, "unknown update 'sgd' on backend 'pyro'; available: fused"),
        ("nuts", {"potential": "fast"}, "unknown potential 'fast' on backend 'pyro'; available"),
        ("hmc", {"potential": True}, "unknown potential True on backend 'pyro'; available"),
    ],
)
def test_invalid_values_of_a_backends_own_options(
    model: BNN, method: str, options: dict, match: str
) -> None:
    """The backend that alone reads an option declares its values, and checks them."""
    with pytest.raises(ValueError, match=match):
        fit(model, method, backend="pyro", **options)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0", None, 2**64, -(2**64), np.float64(3.0)])
def test_bad_seed(model: BNN, seed: object) -> None:
    with pytest.raises(ValueError, match=r"seed must be .* \(0 to 18446744073709551615, what a"):
        fit(model, "svi", seed=seed)


def test_the_largest_seed_fits_saves_and_loads(model: BNN, tmp_path: Path) -> None:
    largest = 2**64 - 1
    result = fit(model, "map", backend="pyro", jit=False, num_steps=2, seed=np.uint64(largest))
    assert FitResult.load(result.save(tmp_path / "fit")).seed == largest


@pytest.mark.parametrize("not_a_model", [None, "model", (np.zeros((3, 1)), np.zeros(3))])
def test_model_not_a_bnn(not_a_model: object) -> None:
    with pytest.raises(TypeError, match=r"model must be a ppl_bnn\.BNN"):
        fit(not_a_model, "svi")  # type: ignore[arg-type]


# --- FitResult.predict --------------------------------------------------------------------------


def test_fitted_result_shape(fitted: FitResult) -> None:
    assert fitted.draws["w0"].shape == (1, 4, 1, 3)
    assert fitted.log_likelihood.shape == (1, 4, 12)


def test_predict_mean_shape(fitted: FitResult) -> None:
    x = np.linspace(-1, 1, 7)[:, None]
    pred = fitted.predict(x)
    assert pred.mean.shape == (7,)
    assert pred.std.shape == (7,)
    assert pred.f.shape == (4, 7, 1)
    assert np.all(np.isfinite(pred.mean))
    assert np.all(pred.std > 0)


def test_predict_wrong_number_of_features(fitted: FitResult) -> None:
    with pytest.raises(ValueError, match="x has 2 features but the model was built with 1"):
        fitted.predict(np.zeros((5, 2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_predict_non_finite_inputs(fitted: FitResult, bad: float) -> None:
    x = np.zeros((5, 1))
    x[2, 0] = bad
    with pytest.raises(ValueError, match=r"x contains non-finite values \(NaN or inf\) in 1 row"):
        fitted.predict(x)


def test_predict_1d_inputs(fitted: FitResult) -> None:
    with pytest.raises(ValueError, match=r"x must be 2-dimensional \(N, D\), got shape \(5,\)"):
        fitted.predict(np.zeros(5))


def test_predict_empty_inputs(fitted: FitResult) -> None:
    with pytest.raises(ValueError, match="x has no rows"):
        fitted.predict(np.zeros((0, 1)))


# --- options that one backend only reads --------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "option", "value"),
    [
        ("nuts", "potential", "eager"),
        ("hmc", "potential", "compiled"),
        ("svi", "update", "pyro"),
        ("svi", "jit", False),
        ("laplace", "update", "fused"),
        ("ensemble", "jit", True),
        ("sgld", "jit", False),
        ("sghmc", "jit", True),
    ],
)
def test_pyro_only_option_on_numpyro_is_refused(
    model: BNN, method: str, option: str, value: object
) -> None:
    smoke = get_method(method, "numpyro").smoke
    match = rf"option '{option}' of method '{method}' applies to the pyro backend only"
    with pytest.raises(ValueError, match=match) as info:
        fit(model, method, backend="numpyro", **smoke, **{option: value})
    assert "backend 'numpyro' does not read it" in str(info.value)


def test_backend_only_options_are_declared_on_the_options_fields() -> None:
    """One place says which backend an option belongs to: that backend's declaration; every
    field marked as one backend's own is listed by a backend, and every option a backend lists
    is such a field."""
    assert option_backends(NUTSOptions) == {
        "potential": "pyro", "init": "numpyro", "chain_method": "numpyro",
    }  # fmt: skip
    assert option_backends(SVIOptions) == {"jit": "pyro", "update": "pyro"}
    assert option_backends(SGLDOptions) == {"jit": "pyro"}
    listed = set()
    for method in METHODS:
        owned = option_backends(method.options)
        assert set(owned.values()) <= set(BACKENDS), method.name
        listed |= owned.keys()
    assert listed == set(option_owners())


def test_a_field_marked_as_one_backends_own_that_no_backend_lists_is_named() -> None:
    @dataclass(frozen=True)
    class Options:
        turbo: bool = backend_option(False)

    with pytest.raises(LookupError, match=r"option 'turbo' of Options is one backend's own, but"):
        option_backends(Options)


def test_stored_options_with_every_field_still_read_back(fitted: FitResult) -> None:
    """A NumPyro result stores the defaults of Pyro-only options; reading them back (as the
    benchmark's evaluation does) is not a fit and names no backend."""
    assert fitted.options["update"] == "fused"
    entry = get_method("svi", "numpyro")
    assert make_options(entry, fitted.options).num_steps == 5
    assert backend_options(entry, "numpyro", fitted.options).keys() == (
        fitted.options.keys() - {"jit", "update"}
    )
    assert backend_options(entry, "pyro", fitted.options) == fitted.options
