"""BNN: input validation, prior draws, parameter checks and the log joint of both backends."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ppl_bnn import BNN, layers, priors
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.model.targets import class_indices

BACKENDS = backend_names()


@pytest.fixture
def xy() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 2))
    y = x[:, 0] - 0.5 * x[:, 1] + 0.1 * rng.normal(size=10)
    return x, y


@pytest.fixture
def model(xy: tuple[np.ndarray, np.ndarray]) -> BNN:
    x, y = xy
    return BNN(x, y, hidden=(3,), noise=0.2)


@pytest.fixture
def learned_model(xy: tuple[np.ndarray, np.ndarray]) -> BNN:
    x, y = xy
    return BNN(x, y, hidden=(3,), noise="learned")


# --- bad inputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_x(xy: tuple[np.ndarray, np.ndarray], bad: float) -> None:
    x, y = xy
    x = x.copy()
    x[3, 1] = bad
    x[7, 0] = bad
    with pytest.raises(ValueError, match=r"x contains non-finite values .* in 2 row\(s\)"):
        BNN(x, y, hidden=(3,), noise=0.1)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_y(xy: tuple[np.ndarray, np.ndarray], bad: float) -> None:
    x, y = xy
    y = y.copy()
    y[4] = bad
    with pytest.raises(ValueError, match=r"y contains 1 non-finite value"):
        BNN(x, y, hidden=(3,), noise=0.1)


def test_non_finite_classification_labels(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.zeros(10)
    y[1] = 1
    y[2] = np.nan
    with pytest.raises(ValueError, match="y contains non-finite labels"):
        BNN(x, y, hidden=(3,), likelihood="categorical", num_classes=2)


@pytest.mark.parametrize("n_y", [9, 11])
def test_mismatched_lengths(xy: tuple[np.ndarray, np.ndarray], n_y: int) -> None:
    x, _ = xy
    with pytest.raises(ValueError, match=rf"y has {n_y} entries but x has 10 rows"):
        BNN(x, np.zeros(n_y), hidden=(3,), noise=0.1)


@pytest.mark.parametrize("shape", [(10,), (10, 2, 1), ()])
def test_x_not_2d(shape: tuple[int, ...]) -> None:
    x = np.zeros(shape)
    with pytest.raises(ValueError, match=r"x must be 2-dimensional \(N, D\)"):
        BNN(x, np.zeros(10), hidden=(3,), noise=0.1)


@pytest.mark.parametrize("shape", [(10, 1), (1, 10), ()])
def test_y_not_1d(xy: tuple[np.ndarray, np.ndarray], shape: tuple[int, ...]) -> None:
    x, _ = xy
    with pytest.raises(ValueError, match=r"y must be 1-dimensional \(N,\)"):
        BNN(x, np.zeros(shape), hidden=(3,), noise=0.1)


def test_empty_x() -> None:
    with pytest.raises(ValueError, match="x has no rows"):
        BNN(np.zeros((0, 2)), np.zeros(0), hidden=(3,), noise=0.1)


def test_non_numeric_x(xy: tuple[np.ndarray, np.ndarray]) -> None:
    _, y = xy
    x = np.array([["a", "b"]] * 10)
    with pytest.raises(ValueError, match="x must be a numeric array, got dtype <U1"):
        BNN(x, y, hidden=(3,), noise=0.1)


def test_object_x(xy: tuple[np.ndarray, np.ndarray]) -> None:
    _, y = xy
    x = np.empty((10, 2), dtype=object)
    x[:] = 1.0
    with pytest.raises(ValueError, match="x must be a numeric array, got dtype object"):
        BNN(x, y, hidden=(3,), noise=0.1)


def test_labels_given_a_noise_are_refused_with_the_fix(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    with pytest.raises(ValueError, match=r"y holds labels \('1.0', .*leave the likelihood out"):
        BNN(x, np.array(["1.0"] * 10), hidden=(3,), noise=0.1)
    with pytest.raises(ValueError, match="y holds labels"):
        BNN(x, np.array(["a", "b"] * 5), hidden=(3,), likelihood="gaussian")


def test_string_labels_become_classes_in_sorted_order(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    labels = pd.Series(["versicolor", "setosa", "virginica", "setosa", "setosa"] * 2)
    model = BNN(pd.DataFrame(x, columns=["a", "b"]), labels, hidden=(3,))
    assert model.spec.likelihood == "categorical" and model.spec.num_classes == 3
    assert model.classes == ("setosa", "versicolor", "virginica")
    assert model.y.tolist() == [1, 0, 2, 0, 0] * 2
    assert model.feature_names == ("a", "b")
    booleans = BNN(x, np.array([True, False] * 5), hidden=(3,))
    assert booleans.feature_names is None
    assert booleans.classes == ("False", "True") and booleans.y.tolist() == [1, 0] * 5
    with pytest.raises(
        ValueError, match=r"y has 2 missing label\(s\), at index 2, 7: drop those rows"
    ):
        BNN(x, ["a", "b", None, "a", "b"] * 2, hidden=(3,))


def test_held_out_labels_map_by_the_models_classes() -> None:
    classes = ("setosa", "versicolor", "virginica")
    assert class_indices(pd.Series(["virginica", "setosa"]), classes).tolist() == [2, 0]
    assert class_indices([True, False], ("False", "True")).tolist() == [1, 0]
    with pytest.raises(
        ValueError, match=r"y_test holds labels the model's classes do not: 'rose'; its classes: "
    ):
        class_indices(["setosa", "rose"], classes, name="y_test")


def test_integer_labels_are_classes_and_floats_a_learned_regression(
    xy: tuple[np.ndarray, np.ndarray], caplog: pytest.LogCaptureFixture
) -> None:
    x, y = xy
    with caplog.at_level(logging.INFO, logger="ppl_bnn.model.targets"):
        digits = BNN(x, np.array([0, 1, 2, 1, 0] * 2), hidden=(3,))
    assert "the categorical likelihood" in caplog.text and 'likelihood="gaussian"' in caplog.text
    assert digits.spec.likelihood == "categorical" and digits.spec.num_classes == 3
    assert digits.classes is None
    counts = BNN(x, np.array([0, 1, 2, 1, 0] * 2), hidden=(3,), noise="learned")
    assert counts.spec.likelihood == "gaussian"
    learned = BNN(x, pd.Series(y), hidden=(3,))
    assert (learned.spec.likelihood, learned.spec.noise) == ("gaussian", "learned")


def test_classification_non_integer_labels(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.array([0, 1, 0.5, 1, 0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"integer class labels 0\.\.K-1, found non-integers"):
        BNN(x, y, hidden=(3,), likelihood="categorical")


def test_classification_negative_labels(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.array([0, 1, -1, 1, 0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"class labels 0\.\.K-1, found -1"):
        BNN(x, y, hidden=(3,), likelihood="categorical")


def test_classification_label_too_large(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.array([0, 1, 2, 3, 0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"y has label 3 but the model allows classes 0..2"):
        BNN(x, y, hidden=(3,), likelihood="categorical", num_classes=3)


def test_inputs_are_stored_as_float32(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = xy
    model = BNN(x.tolist(), y.tolist(), hidden=(3,), noise=0.1)
    assert model.x.dtype == np.float32
    assert model.y.dtype == np.float32
    np.testing.assert_allclose(model.x, x, rtol=1e-6)
    assert model.num_data == 10


# --- classification labels ----------------------------------------------------------------------


def test_num_classes_inferred_from_labels(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.array([0, 1, 3, 1, 0, 1, 0, 1, 0, 1])
    model = BNN(x, y, hidden=(3,), likelihood="categorical")
    assert model.spec.num_classes == 4
    assert model.spec.output_dim == 4
    assert model.y.dtype == np.int64


def test_integer_valued_float_labels_are_accepted(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.array([0.0, 1.0, 2.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    model = BNN(x, y, hidden=(3,), likelihood="categorical")
    assert model.spec.num_classes == 3
    np.testing.assert_array_equal(model.y, y.astype(np.int64))


def test_explicit_num_classes_is_kept(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = xy
    y = np.array([0, 1] * 5)
    model = BNN(x, y, hidden=(3,), likelihood="categorical", num_classes=5)
    assert model.spec.num_classes == 5


# --- init_params --------------------------------------------------------------------------------


def test_init_params_names_shapes_dtype(model: BNN) -> None:
    params = model.init_params(seed=0)
    assert list(params) == [s.name for s in model.spec.sites()] == ["w0", "b0", "w1", "b1"]
    for site in model.spec.sites():
        assert params[site.name].shape == site.shape
        assert params[site.name].dtype == np.float32
        assert np.all(np.isfinite(params[site.name]))


def test_init_params_deterministic_per_seed(model: BNN) -> None:
    a, b = model.init_params(seed=3), model.init_params(seed=3)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_init_params_differ_across_seeds(model: BNN) -> None:
    a, b = model.init_params(seed=3), model.init_params(seed=4)
    for name in a:
        assert not np.array_equal(a[name], b[name]), name


def test_init_params_rejects_bad_seed(model: BNN) -> None:
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        model.init_params(seed=-1)


def test_init_params_follow_prior_scale(xy: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = xy
    wide = BNN(x, y, hidden=(400,), prior_scale=(0.01, 5.0), noise=0.1)
    params = wide.init_params(seed=0)
    assert np.std(params["w0"]) == pytest.approx(0.01, rel=0.1)
    assert np.std(params["w1"]) == pytest.approx(5.0, rel=0.15)


def test_learned_noise_adds_positive_precision(learned_model: BNN) -> None:
    assert [s.name for s in learned_model.spec.sites()][-1] == "precision"
    for seed in range(5):
        params = learned_model.init_params(seed=seed)
        assert list(params) == ["w0", "b0", "w1", "b1", "precision"]
        assert params["precision"].shape == ()
        assert params["precision"].dtype == np.float32
        assert params["precision"] > 0


@pytest.mark.parametrize("form", ["shorthand", "layers"])
def test_noise_prior_reaches_the_precision_site(xy, form: str) -> None:
    x, y = xy
    network = {} if form == "shorthand" else {"layers": [layers.Dense(4, "tanh"), layers.Dense(1)]}
    model = BNN(x, y, noise="learned", noise_prior=priors.Gamma(2.0, 3.0), **network)
    assert model.spec.sites()[-1].prior == priors.Gamma(2.0, 3.0)
    draws = [model.init_params(seed=s)["precision"] for s in range(400)]
    # sd sqrt(2) / 3 over 400 draws: 0.0236; the tolerance is 4.2 standard errors
    assert np.mean(draws) == pytest.approx(2.0 / 3.0, rel=0.15)
    with pytest.raises(ValueError, match="noise_prior applies to noise='learned' only"):
        BNN(x, y, noise=0.1, noise_prior=priors.Gamma(2.0, 3.0), **network)


# --- check_params -------------------------------------------------------------------------------


def test_check_params_accepts_valid_and_casts(model: BNN) -> None:
    params = {k: v.astype(np.float64) for k, v in model.init_params(seed=0).items()}
    checked = model.check_params(params)
    assert set(checked) == set(params)
    assert all(v.dtype == np.float32 for v in checked.values())


def _bad_params(model: BNN, kind: str) -> tuple[dict, str]:
    params = dict(model.init_params(seed=0))
    if kind == "missing":
        del params["b1"]
        return params, r"missing \['b1'\], unexpected \[\]"
    if kind == "extra":
        params["w9"] = np.zeros((1, 1), dtype=np.float32)
        return params, r"missing \[\], unexpected \['w9'\]"
    if kind == "shape":
        params["w1"] = np.zeros((1, 3), dtype=np.float32)
        return params, r"params\['w1'\] has shape \(1, 3\), expected \(3, 1\)"
    if kind == "nan":
        params["w0"] = params["w0"].copy()
        params["w0"][0, 0] = np.nan
        return params, r"params\['w0'\] contains non-finite values"
    if kind == "inf":
        params["b0"] = params["b0"].copy()
        params["b0"][1] = np.inf
        return params, r"params\['b0'\] contains non-finite values"
    raise AssertionError(kind)


BAD_KINDS = ["missing", "extra", "shape", "nan", "inf"]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_check_params_errors(model: BNN, kind: str) -> None:
    params, match = _bad_params(model, kind)
    with pytest.raises(ValueError, match=match):
        model.check_params(params)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_log_density_checks_params(model: BNN, kind: str, backend: str) -> None:
    params, match = _bad_params(model, kind)
    with pytest.raises(ValueError, match=match):
        model.log_density(params, backend)


def test_check_params_missing_precision(learned_model: BNN) -> None:
    params = dict(learned_model.init_params(seed=0))
    del params["precision"]
    with pytest.raises(ValueError, match=r"missing \['precision'\]"):
        learned_model.check_params(params)


def test_check_params_precision_on_known_noise_model(model: BNN) -> None:
    params = dict(model.init_params(seed=0))
    params["precision"] = np.float32(1.0)
    with pytest.raises(ValueError, match=r"unexpected \['precision'\]"):
        model.check_params(params)


@pytest.mark.parametrize("backend", [None, *BACKENDS])
@pytest.mark.parametrize("value", [0.0, -1.0])
def test_non_positive_precision(learned_model: BNN, value: float, backend: str | None) -> None:
    params = dict(learned_model.init_params(seed=0))
    params["precision"] = np.float32(value)
    with pytest.raises(ValueError, match=r"params\['precision'\] must be > 0"):
        if backend is None:
            learned_model.check_params(params)
        else:
            learned_model.log_density(params, backend)


def test_log_density_unknown_backend(model: BNN) -> None:
    with pytest.raises(ValueError, match="unknown backend 'stan'") as info:
        model.log_density(model.init_params(seed=0), "stan")
    assert "numpyro" in str(info.value)
    assert "pyro" in str(info.value)


# --- log joint in closed form -------------------------------------------------------------------


def _reference_log_joint(
    x: np.ndarray, y: np.ndarray, params: dict, prior_scale: float, noise: float
) -> float:
    w = params["w0"].astype(np.float64)
    b = params["b0"].astype(np.float64)
    log_prior = (
        stats.norm.logpdf(w, 0.0, prior_scale).sum() + stats.norm.logpdf(b, 0.0, prior_scale).sum()
    )
    f = x.astype(np.float64) @ w[:, 0] + b[0]
    return float(log_prior + stats.norm.logpdf(y.astype(np.float64), f, noise).sum())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_log_density_linear_gaussian_closed_form(backend: str, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(15, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=15)).astype(np.float32)
    model = BNN(x, y, hidden=(), prior_scale=1.5, noise=0.3)
    params = model.init_params(seed=seed)
    expected = _reference_log_joint(x, y, params, prior_scale=1.5, noise=0.3)
    assert model.log_density(params, backend) == pytest.approx(expected, rel=1e-5)


def test_log_density_backends_agree_on_hidden_network(learned_model: BNN) -> None:
    params = learned_model.init_params(seed=2)
    values = [learned_model.log_density(params, b) for b in BACKENDS]
    assert np.isfinite(values).all()
    assert values[0] == pytest.approx(values[1], rel=1e-5)


def test_huge_float_label_is_a_clear_error() -> None:
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match=r"y has label 1e\+30 but the model allows classes"):
        BNN(x, np.array([0.0, 1e30, 1.0]), hidden=(2,), likelihood="categorical")


def test_values_beyond_float32_are_a_clear_error() -> None:
    x = np.array([[1e39], [0.0], [1.0]])
    with pytest.raises(ValueError, match=r"x has values beyond the float32 range"):
        BNN(x, np.zeros(3), hidden=(2,), noise=0.1)
    with pytest.raises(ValueError, match=r"y has values beyond the float32 range"):
        BNN(np.zeros((3, 1)), np.array([0.0, 1e39, 1.0]), hidden=(2,), noise=0.1)


# --- inputs that used to get a misleading error, or none ------------------------------------------


def test_unknown_likelihood_is_named_before_the_targets_are_read(xy) -> None:
    x, y = xy
    with pytest.raises(ValueError, match=r"unknown likelihood 'poisson'; allowed: gaussian, cat"):
        BNN(x, y, hidden=(3,), likelihood="poisson")


@pytest.mark.parametrize(
    ("prior_scale", "match"),
    [
        ("1", r"prior_scale must be a number .*, got '1': a str, not a number"),
        (["1"], r"prior_scale values must be finite and > 0, got \['1'\]: '1' is a str, not a"),
        ((1.0, "2"), r"got \(1.0, '2'\): '2' is a str, not a number"),
        (b"1", r"prior_scale must be a number .*, got b'1': a bytes, not a number"),
        (np.array("1"), r"prior_scale must be a number .*: a str, not a number"),
    ],
)
def test_prior_scale_that_is_not_a_number_says_so(xy, prior_scale: object, match: str) -> None:
    x, y = xy
    with pytest.raises(ValueError, match=match):
        BNN(x, y, hidden=(3,), prior_scale=prior_scale, noise=0.1)


def test_prior_that_is_not_a_number_says_so() -> None:
    with pytest.raises(ValueError, match=r"Normal scale must be .*, got '1': a str, not a number"):
        priors.Normal("1")


@pytest.mark.parametrize("magnitude", [1e30, -1e17])
def test_targets_too_large_for_the_likelihood_are_named(xy, magnitude: float) -> None:
    x, y = xy
    y = y.copy()
    y[4] = magnitude
    match = (
        rf"y has values of magnitude up to {abs(magnitude):.1e}: too large for the Gaussian "
        r"likelihood .* standardise the targets"
    ).replace("+", r"\+")
    with pytest.raises(ValueError, match=match):
        BNN(x, y, hidden=(3,), noise=0.1)
    BNN(x, y / abs(magnitude), hidden=(3,), noise=0.1)  # the same targets, standardised


@pytest.mark.parametrize("dtype", ["timedelta64[s]", "datetime64[s]"])
@pytest.mark.parametrize("name", ["x", "y"])
def test_dates_and_durations_are_refused(xy, dtype: str, name: str) -> None:
    x, y = xy
    data = {"x": x, "y": y}
    data[name] = np.round(data[name] * 100).astype(dtype)
    match = rf"{name} has dtype {dtype}: dates and durations are not numbers".replace("[", r"\[")
    with pytest.raises(ValueError, match=match):
        BNN(data["x"], data["y"], hidden=(3,), noise=0.1)


@pytest.mark.parametrize("name", ["x", "y"])
def test_complex_data_is_refused(xy, name: str) -> None:
    x, y = xy
    data = {"x": x, "y": y}
    data[name] = data[name] + 1j
    with pytest.raises(ValueError, match=rf"{name} is complex \(dtype complex128\): the model"):
        BNN(data["x"], data["y"], hidden=(3,), noise=0.1)


# --- held-out pairs -----------------------------------------------------------------------------


def test_a_held_out_pair_reads_labels_as_the_models_data_gave_them() -> None:
    x = np.random.default_rng(0).normal(size=(9, 2))
    model = BNN(x, np.array(["b", "a", "c"] * 3), hidden=(3,))
    x_val, y_val = model.held_out((x[:3], ["c", "a", "b"]))
    np.testing.assert_array_equal(y_val, [2, 0, 1])
    assert x_val.shape == (3, 2)
    with pytest.raises(ValueError, match="y_test"):
        model.held_out((x[:2], ["a", "z"]), "test")


@pytest.mark.parametrize(
    ("pair", "what", "error", "match"),
    [
        (np.zeros((3, 2)), "validation", TypeError, r"validation must be a pair \(x_val, y_val\)"),
        ((np.zeros((3, 2)),), "test", TypeError, r"test must be a pair \(x_test, y_test\)"),
        ((np.zeros((3, 3)), np.zeros(3)), "test", ValueError, "x_test has 3 features"),
        ((np.zeros((3, 2)), np.zeros(4)), "validation", ValueError, "y_val has 4 entries"),
    ],
)
def test_a_bad_held_out_pair_is_named(model: BNN, pair, what: str, error, match: str) -> None:
    with pytest.raises(error, match=match):
        model.held_out(pair, what)
