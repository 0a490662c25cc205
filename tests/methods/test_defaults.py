"""The baselines, the Gaussian guides and the SG-MCMC samplers called as a user first calls
them, ``fit(model, method)`` with every option at its default, on both backends, on a small
standardised regression set with the noise learned and a small classification set: each beats
the constant predictor on held-out points, and a default that diverges is a bug
(``benchmarks/defaults_audit.py`` is the full audit, on the UCI sets and digits, every method on
both backends). ``nuts`` and ``hmc`` are not here: their defaults (500 + 500 draws, up to 1,023
leapfrog steps each) are minutes per fit; the audit runs them.

Each method runs on both problems and on both backends, not on every pair of the two
(:func:`_cases`): its defaults are one table for both backends, whose drivers the closed-form
tests check, and a problem and a backend each get every method."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.datasets import load_diabetes, load_digits

from ppl_bnn import BNN, fit
from ppl_bnn.bench.fit_store import use_store
from ppl_bnn.engine.registry import backend_names

# Seconds on 2 cores: its tests start first, spread over the workers (tests/conftest.py).
pytestmark = pytest.mark.runtime(250)

BASELINES = ("map", "laplace", "swag", "mcdropout", "ensemble")
#: With a prior-draw start and a fixed step size, sghmc and csghmc diverged here with the noise
#: learned (``benchmarks/defaults_audit.py`` found them on three UCI sets).
SAMPLERS = ("sgld", "sghmc", "csgld", "csghmc")
GUIDES = ("svi", "lowrank", "fullrank")
#: Left out for time: fullrank on the classification set (1,510 weights, a 1,510 x 1,510
#: factor) takes 80 s on NumPyro and 126 s on Pyro, and its failure there (the factor's density
#: scored by a float32 solve, -3.11 on the UCI digits) is tested in tests/backends/test_guides.py;
#: lowrank there (25 s on the two backends) scored as svi on the UCI digits.
SLOW = {("fullrank", "digits"), ("lowrank", "digits")}
#: Hidden units of the regression net per method, for time: fullrank's factor is D x D, and on
#: the 601 weights of 50 units its default fit took 85 s on NumPyro and 76 s on Pyro here (the
#: tests' XLA flags slow its large elementwise updates most); on the 241 weights of 20 units it
#: takes 28 s and 36 s, and still beats the constant predictor by 0.4 nats.
HIDDEN = {"fullrank": 20}
#: Left out for time on Pyro: the ensemble is K map fits on the target's backend combined in
#: numpy (a backend-neutral runner), so on Pyro it adds five of the map fits that
#: ``map``'s Pyro case already tests (37 s together on the two problems).
BACKEND_NEUTRAL = {("ensemble", "pyro")}
BACKENDS = backend_names()
#: Methods that run on the backend of map's case of each problem: they start from its mode,
#: which the store shares (:func:`shared_fits`).
FROM_MAP = ("map", "laplace", "swag")


def _regression(hidden: int = 50) -> tuple[BNN, tuple[np.ndarray, np.ndarray], float]:
    """diabetes, standardised, 350 training points for a net of ``hidden`` units (601 weights
    at 50); its held-out points and the constant predictor's log-likelihood on them (a Gaussian
    at the training moments)."""
    x, y = load_diabetes(return_X_y=True)
    x, y = (x - x.mean(0)) / x.std(0), (y - y.mean()) / y.std()
    model = BNN(x[:350], y[:350], hidden=(hidden,), noise="learned")
    constant = norm.logpdf(y[350:], y[:350].mean(), y[:350].std()).mean()
    return model, (x[350:], y[350:]), float(constant)


def _classification() -> tuple[BNN, tuple[np.ndarray, np.ndarray], float]:
    """digits, 300 training images; 100 held out and the training class frequencies' score."""
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    model = BNN(x[:300], y[:300], hidden=(20,), likelihood="categorical")
    frequencies = np.bincount(y[:300], minlength=10) / 300
    return model, (x[300:400], y[300:400]), float(np.log(frequencies[y[300:400]]).mean())


PROBLEMS = {"regression": _regression, "digits": _classification}


@pytest.fixture(scope="module", autouse=True)
def shared_fits(tmp_path_factory: pytest.TempPathFactory):
    """MAP's runs shared as the benchmark shares them: laplace and swag start from the mode of
    map's own default fit, read back instead of fitted again."""
    with use_store(tmp_path_factory.mktemp("fits")):
        yield


def _cases() -> list[tuple[str, str, str]]:
    """(method, problem, backend): each method on each problem, its backends alternating
    between the problems and between methods, so that each problem sees both backends; a
    method with one problem (:data:`SLOW`) runs it on both backends, and one with one backend
    (:data:`BACKEND_NEUTRAL`) both problems on it."""
    cases = []
    for i, method in enumerate(BASELINES + GUIDES + SAMPLERS):
        problems = [p for p in PROBLEMS if (method, p) not in SLOW]
        backends = [b for b in BACKENDS if (method, b) not in BACKEND_NEUTRAL]
        if len(problems) == 1 or len(backends) == 1:
            cases += [(method, p, b) for p in problems for b in backends]
            continue
        shift = 0 if method in FROM_MAP else i
        cases += [
            (method, p, backends[(j + shift) % len(backends)]) for j, p in enumerate(problems)
        ]
    return cases


@pytest.mark.parametrize(("method", "problem", "backend"), _cases())
def test_a_method_with_its_defaults_beats_the_constant_predictor(method, problem, backend):
    width = {"hidden": HIDDEN[method]} if problem == "regression" and method in HIDDEN else {}
    model, (x_test, y_test), constant = PROBLEMS[problem](**width)
    result = fit(model, method, backend=backend, seed=0)  # raises if nothing is kept
    assert not result.info.get("diverged", False), result.info.get("diverged_at_step")
    assert result.predict(x_test).mean_log_predictive_density(y_test) > constant


@pytest.mark.parametrize(("method", "points", "keep", "warns"), [
    ("map", 40, None, True), ("swag", 40, None, True), ("ensemble", 40, None, True),
    ("map", 240, None, False), ("map", 240, "lowest", True), ("map", 500, "lowest", False),
    ("laplace", 40, None, False), ("mcdropout", 40, None, False),
])  # fmt: skip
def test_a_method_that_keeps_a_mode_warns_on_few_points_per_weight(
    method, points, keep, warns, caplog
) -> None:
    # 2 inputs, 30 units, 1 output: 121 weights, so 484 points are the threshold of 4 per
    # weight. Below 200 points map keeps its lowest loss; from 200 it stops early by default.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(points, 2))
    model = BNN(x, x[:, 0], hidden=(30,), noise="learned")
    options = {"num_snapshots": 2, "rank": 2} if method == "swag" else {}
    if keep is not None:
        options["keep"] = keep
    with caplog.at_level("WARNING", logger="ppl_bnn.fit"):
        fit(model, method, seed=0, num_steps=5, **options)
    expected = f"{method}: {points} training points for 121 weights, fewer than 4 per weight"
    assert any(expected in r.getMessage() for r in caplog.records) == warns, caplog.text


@pytest.mark.parametrize(
    ("options", "warns"), [({}, True), ({"dropout_rate": 0.05}, False), ({"concrete": True}, False)]
)
def test_mc_dropout_warns_where_its_rate_is_left_at_the_default(options, warns, caplog) -> None:
    x = np.random.default_rng(0).normal(size=(40, 2))
    model = BNN(x, x[:, 0], hidden=(5,), noise="learned")
    with caplog.at_level("WARNING", logger="ppl_bnn.fit"):
        fit(model, "mcdropout", seed=0, num_steps=5, num_draws=3, **options)
    expected = "mcdropout: no dropout_rate given; its default does not suit every data set"
    assert any(expected in r.getMessage() for r in caplog.records) == warns, caplog.text
