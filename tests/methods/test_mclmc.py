"""``mclmc`` (:mod:`ppl_bnn.methods.mclmc`, driver :mod:`ppl_bnn.backends.numpyro.mclmc`): what a
run records, frozen chains retuned or dropped (never a non-finite draw returned), every chain
frozen refused with the cause, Pyro refused with the reason, bad options refused by name.

Its draws against a closed-form posterior are in ``tests/methods/test_known_posterior.py``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import ppl_bnn.backends.numpyro.mclmc as driver
from ppl_bnn import BNN, fit, priors
from ppl_bnn.methods import get_method, make_options
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.mclmc import MCLMCOptions
from ppl_bnn.methods.memory import FLOAT32, required_bytes

pytestmark = pytest.mark.runtime(25)  # seconds on 2 cores: started first (tests/conftest.py)

#: Every fit here runs these shapes, so the compiled programs are shared (3 chains; 1 retuned).
OPTIONS = {"num_warmup": 100, "num_samples": 50, "num_chains": 3}


@pytest.fixture(scope="module")
def model() -> BNN:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    y = x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=16)
    return BNN(x, y, hidden=(3,), noise="learned", noise_prior=priors.PBP_NOISE_PRIOR)


def _moving_finite_chains(draws: dict[str, np.ndarray]) -> None:
    for site, values in draws.items():
        assert np.all(np.isfinite(values)), site
    w0 = draws["w0"]
    for chain in range(w0.shape[0]):
        assert not np.all(w0[chain] == w0[chain, :1]), f"chain {chain} does not move"


def _freeze(monkeypatch, which) -> list[float]:
    """Make the tuner return a step size of 0 for the chains ``which(call)`` (a mask or index
    into the chains of that call; call 1 is the first tuning); the starting step sizes of each
    tuning, in order."""
    original = driver._Runner.tune
    starts: list[float] = []

    def tune(self, positions, keys, step_size):
        state, params = original(self, positions, keys, step_size)
        starts.append(step_size)
        frozen = which(len(starts))
        if frozen is not None:
            params = params._replace(step_size=params.step_size.at[frozen].set(0.0))
        return state, params

    monkeypatch.setattr(driver._Runner, "tune", tune)
    return starts


def test_a_run_records_its_tuning_draws_and_timings(model):
    result = fit(model, "mclmc", seed=0, **OPTIONS)
    assert result.draws["w0"].shape == (3, 50, 2, 3)
    _moving_finite_chains(result.draws)
    for stat in ("lp", "energy_change", "diverging", "step_size"):
        assert result.sample_stats[stat].shape == (3, 50), stat
    assert np.all(np.isfinite(result.sample_stats["lp"]))
    info = result.info
    assert info["chain_method"] == "vectorized"
    assert (info["frozen_chains"], info["dropped_chains"]) == ([], [])
    assert len(info["step_size"]) == len(info["L"]) == len(info["energy_var"]) == 3
    # Tuned from 1e-3, the step sizes grow by orders of magnitude; L is positive.
    assert min(info["step_size"]) > 1e-2 and min(info["L"]) > 0
    np.testing.assert_allclose(result.sample_stats["step_size"][:, 0], info["step_size"])
    assert result.timings["compile"] > 0
    assert result.timings["warmup"] > 0 and result.timings["sampling"] > 0


def test_a_chain_frozen_at_tuning_is_retuned_from_a_smaller_start(model, monkeypatch):
    """Chain 1's first tuning returns a step size of 0: it is retuned alone, from a start ten
    times smaller, and kept; ``info`` says it froze."""
    starts = _freeze(monkeypatch, lambda call: 1 if call == 1 else None)
    result = fit(model, "mclmc", seed=0, **OPTIONS)
    assert starts == [1e-3, pytest.approx(1e-4)]
    assert result.info["frozen_chains"] == [1]
    assert result.info["dropped_chains"] == []
    assert result.draws["w0"].shape[0] == 3
    _moving_finite_chains(result.draws)
    assert result.info["step_size"][1] > 1e-2


def test_a_chain_that_freezes_again_is_dropped(model, monkeypatch):
    """A chain started where the log density is not finite (no patched tuner: BlackJAX reverts
    every step, shrinking the step size to 0) freezes at both tunings and is dropped; the other
    chains' draws are returned."""
    original = driver._starts

    def starts(*args):
        positions, info = original(*args)
        return positions.at[0].set(jnp.nan), info

    monkeypatch.setattr(driver, "_starts", starts)
    result = fit(model, "mclmc", seed=0, **OPTIONS)
    assert result.info["frozen_chains"] == [0]
    [dropped] = result.info["dropped_chains"]
    assert dropped["chain"] == 0
    assert dropped["reason"].startswith("its tuned step size fell to 0 from 0.0001")
    assert result.draws["w0"].shape == (2, 50, 2, 3)
    assert result.log_likelihood.shape == (2, 50, 16)
    _moving_finite_chains(result.draws)


def test_a_chain_with_non_finite_draws_is_dropped_and_none_is_returned(model, monkeypatch):
    """Draws that are not finite mark their chain like a frozen one: retuned, then dropped;
    ``fit``'s own check never sees them."""
    original = driver._Runner.constrain

    def constrain(self, positions):
        draws = {site: np.array(v) for site, v in original(self, positions).items()}
        draws["w1"][-1, 10] = np.nan  # the last chain of every attempt
        return draws

    monkeypatch.setattr(driver._Runner, "constrain", constrain)
    result = fit(model, "mclmc", seed=0, **OPTIONS)
    assert result.info["frozen_chains"] == [2]
    assert result.info["dropped_chains"] == [{"chain": 2, "reason": "its draws are not finite"}]
    assert result.draws["w1"].shape[0] == 2
    _moving_finite_chains(result.draws)


def test_every_chain_frozen_raises_diverged_error_naming_the_cause(model, monkeypatch):
    starts = _freeze(monkeypatch, lambda call: jnp.s_[:])
    with pytest.raises(DivergedError, match="tuner froze every chain") as info:
        fit(model, "mclmc", seed=0, **OPTIONS)
    assert starts == [1e-3, pytest.approx(1e-4)]  # retuned once, not more
    message = str(info.value)
    assert "try a smaller step_size" in message and "init='ensemble'" in message
    assert info.value.method == "mclmc"
    assert "step_size=0.001" in info.value.cause


def test_ensemble_starts_that_lost_members_run_that_many_chains(model, monkeypatch):
    """``ensemble_starts`` leaves out a member that diverged: the chains are as many as the
    starts it gives, and making them counts as warm-up."""
    site_shapes = {s.name: s.shape for s in model.spec.sites()}
    values = {name: np.full((1, *shape), 0.1, np.float32) for name, shape in site_shapes.items()}
    values["precision"] = np.full((1,), 4.0, np.float32)

    def one_start(name, target, num_chains, seed):
        return values, {"num_starts": 1, "start_seconds": 5.0}

    monkeypatch.setattr(driver, "ensemble_starts", one_start)
    result = fit(model, "mclmc", seed=0, init="ensemble", **OPTIONS)
    assert result.draws["w0"].shape == (1, 50, 2, 3)
    assert result.info["num_starts"] == 1 and "start_seconds" not in result.info
    assert result.timings["warmup"] > 5.0


@pytest.mark.parametrize(
    ("step_size", "inverse_mass", "positions", "finite", "reason"),
    [
        (0.5, [1.0, 1.0], [[0.0, 1.0], [1.0, 0.0]], True, None),
        (0.0, [1.0, 1.0], [[0.0, 1.0], [1.0, 0.0]], True, "step size fell to 0 from 0.001"),
        (np.nan, [1.0, 1.0], [[0.0, 1.0], [1.0, 0.0]], True, "step size fell to nan"),
        (0.5, [1.0, 0.0], [[0.0, 1.0], [1.0, 0.0]], True, "zero or not finite"),
        (0.5, [1.0, np.inf], [[0.0, 1.0], [1.0, 0.0]], True, "zero or not finite"),
        (0.5, [1.0, 1.0], [[0.0, 1.0], [1.0, 0.0]], False, "not finite"),
        (0.5, [1.0, 1.0], [[2.0, 2.0], [2.0, 2.0]], True, "do not move"),
    ],
)
def test_what_makes_a_chain_frozen(step_size, inverse_mass, positions, finite, reason):
    """Step size, preconditioner, finiteness, movement (here from the tuned position (2, 2));
    a healthy step size is any above a millionth of the start."""
    why = driver.frozen_reason(
        1e-3, step_size, np.asarray(inverse_mass), np.array([2.0, 2.0]), np.asarray(positions),
        finite,
    )  # fmt: skip
    assert why is None if reason is None else reason in why
    moving = (np.ones(2), np.zeros(2), np.ones((1, 2)), True)
    assert driver.frozen_reason(1e-3, 2e-9, *moving) is None
    assert driver.frozen_reason(1e-3, 5e-10, *moving)


def test_pyro_is_refused_with_the_reason(model):
    reason = r"'mclmc' is not available on backend 'pyro': it declares no 'mclmc'; BlackJAX's "
    with pytest.raises(ValueError, match=reason + r"MCLMC runs on JAX only; it runs on: numpyro"):
        get_method("mclmc", "pyro")
    with pytest.raises(ValueError, match=reason):
        fit(model, "mclmc", backend="pyro", **OPTIONS)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("num_warmup", 5),
        ("num_samples", 0),
        ("thinning", 0),
        ("num_chains", 0),
        ("desired_energy_var", 0.0),
        ("step_size", -1.0),
        ("step_size", 1e-9),
        ("diagonal_preconditioning", "yes"),
        ("init", "prior"),
    ],
)
def test_bad_options_are_refused_by_name(option, value):
    with pytest.raises(ValueError, match=option):
        MCLMCOptions(**{option: value})


def test_the_memory_bound_counts_the_tuners_history():
    """The tuner's last phase (a fifth of the warm-up) keeps every position of every chain."""
    x = np.linspace(-1, 1, 20)[:, None]
    model = BNN(x, x[:, 0], hidden=(10,), noise=0.1)  # 31 weights
    options = make_options(get_method("mclmc", "numpyro"), {"num_chains": 2, "num_warmup": 100})
    assert options.kept_draws == 2 * 1000
    parts = required_bytes(model.spec, options, 20)
    assert parts["the method's covariance or mass matrix"] == 2 * 20 * 31 * FLOAT32
