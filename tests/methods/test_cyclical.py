"""Cyclical SG-MCMC (``csgld``, ``csghmc``; Zhang et al. 2020): the cosine schedule, the phases,
which draws are kept, the closed-form posterior on both backends, and bad options."""

from __future__ import annotations

import math
from types import SimpleNamespace

import arviz as az
import numpy as np
import pytest

from ppl_bnn import fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.csghmc import CSGHMCOptions
from ppl_bnn.methods.csgld import CSGLDOptions
from ppl_bnn.methods.sgmcmc import finish, noise_schedule, step_size_schedule
from tests.closed_form import flat_draws, linear_problem

pytestmark = pytest.mark.runtime(60)  # seconds on 2 cores: started first (tests/conftest.py)

# 2 cycles of 3 exploration blocks and 2 kept draws, each block 5 steps: L = 25.
SMALL = {"step_size": 0.04, "num_cycles": 2, "num_samples": 4, "thinning": 5, "exploration": 0.6}


def test_the_step_size_follows_the_cosine_of_zhang_et_al():
    options = CSGLDOptions(**SMALL)
    assert (options.exploration_blocks, options.cycle_length) == (3, 25)
    assert (options.num_blocks, options.num_steps) == (10, 50)
    schedule = step_size_schedule(options)
    for t in range(50):
        expected = 0.02 * (math.cos(math.pi * (t % 25) / 25) + 1)
        assert schedule(t) == pytest.approx(expected)
    assert schedule(0) == pytest.approx(0.04) and schedule(25) == pytest.approx(0.04)


def test_the_noise_is_off_while_a_cycle_explores():
    noise = noise_schedule(CSGLDOptions(**SMALL))
    assert [noise(t) for t in range(25)] == [0.0] * 15 + [1.0] * 10
    assert [noise(t) for t in range(25, 50)] == [0.0] * 15 + [1.0] * 10
    assert noise_schedule(CSGLDOptions(**SMALL, schedule="cyclical"))(14) == 0.0


def test_only_the_sampling_phase_keeps_draws():
    kept = CSGLDOptions(**SMALL).kept_blocks()
    assert kept.tolist() == [False, False, False, True, True] * 2


def test_exploration_steps_take_no_noise_and_sampling_steps_do():
    # SGLD at a zero gradient: only the noise moves the position.
    init, step = CSGLDOptions(**SMALL).kernel()
    state = init({"a": np.zeros(2)})
    moved = []
    for _ in range(25):
        new, _ = step(state, 0.0, {"a": np.zeros(2)}, {"a": np.ones(2)})
        moved.append(bool(np.any(new.position["a"] != state.position["a"])))
        state = new
    assert moved == [False] * 15 + [True] * 10
    init, step = CSGHMCOptions(**SMALL).kernel()
    state = init({"a": np.zeros(2)})
    new, _ = step(state, 0.0, {"a": np.zeros(2)}, {"a": np.ones(2)})
    np.testing.assert_array_equal(new.momentum["a"], 0.0)


@pytest.fixture(scope="module")
def problem():
    return linear_problem()


@pytest.mark.parametrize("method", ["csgld", "csghmc"])
@pytest.mark.parametrize("backend", backend_names())
def test_kept_draws_and_their_step_sizes_alike_on_both_backends(problem, method, backend):
    result = fit(problem.model, method, backend=backend, seed=0, **SMALL)
    assert result.draws["w0"].shape == (1, 4, 2, 1)
    # Kept draws end blocks 4, 5, 9, 10: steps 19, 24, 44, 49, each the step size of its step.
    steps = np.array([19, 24, 44, 49])
    expected = 0.02 * (np.cos(np.pi * (steps % 25) / 25) + 1)
    np.testing.assert_allclose(result.sample_stats["step_size"][0], expected, rtol=1e-5)
    assert result.info["cycle_length"] == 25


def _ess_and_check(draws: np.ndarray, problem, bias: float) -> None:
    """Mean within 4 Monte Carlo standard errors (bulk ESS) of the exact one, variance within 4
    of its standard errors plus ``bias`` (the discretisation's, relative)."""
    ess = np.array([az.ess(draws[None, :, k]) for k in range(draws.shape[1])])
    z_mean = (draws.mean(axis=0) - problem.mean) / problem.std
    assert np.all(np.abs(z_mean) < 4 / np.sqrt(ess)), (z_mean, ess)
    var_ratio = draws.var(axis=0) / problem.std**2
    assert np.all(np.abs(var_ratio - 1) < 4 * np.sqrt(2 / ess) + bias), (var_ratio, ess)


@pytest.mark.parametrize("method", ["csgld", "csghmc"])
@pytest.mark.parametrize("backend", backend_names())
def test_cyclical_sgmcmc_matches_the_exact_posterior(problem, method, backend):
    # Step sizes in the sampling phases stay below step_size / 2 = 0.005: an Euler bias of the
    # variance of at most 0.005 / (4 * 0.024) = 5%.
    result = fit(
        problem.model,
        method,
        backend=backend,
        seed=4,
        step_size=0.01,
        num_cycles=20,
        num_samples=4000,
        thinning=5,
        exploration=0.5,
    )
    assert result.num_draws == 4000 and not result.info["diverged"]
    _ess_and_check(flat_draws(result.draws).reshape(-1, 3), problem, bias=0.05)


@pytest.mark.parametrize("backend", backend_names())
def test_a_breakdown_while_exploring_keeps_nothing_and_says_so(problem, backend):
    with pytest.raises(DivergedError, match=r"before any draw was kept.*step_size=50"):
        fit(problem.model, "csgld", backend=backend, step_size=50.0, num_samples=8, num_cycles=2)


def test_a_breakdown_in_a_later_cycle_keeps_the_earlier_cycles_draws(problem):
    options = CSGLDOptions(**SMALL)
    blocks = np.arange(10.0).reshape(1, 10, 1)
    draws = {"w0": np.concatenate([blocks, blocks])}
    stats = {"lp": np.concatenate([blocks[..., 0], blocks[..., 0]])}
    target = SimpleNamespace(model=problem.model)
    # Chain 0 breaks down at step 40 (in block 8, cycle 2's sampling phase), chain 1 at 30.
    out = finish("csgld", target, draws, stats, np.array([40, 30]), [], options, {}, {})
    # Both chains completed 6 blocks, of which blocks 3 and 4 are kept draws.
    np.testing.assert_array_equal(out.draws["w0"][:, :, 0], [[3, 4], [3, 4]])
    assert out.info["diverged"] and out.info["diverged_at_step"] == [40, 30]
    assert out.info["draws_dropped_to_align_chains"] == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schedule": "constant"}, r"a cyclical method takes schedule 'cyclical' only, got 'con"),
        ({"num_burnin": 100}, r"explores at the start of every cycle: num_burnin must be 0"),
        ({"num_samples": 10, "num_cycles": 4}, r"num_samples 10 is not a multiple of num_cyc"),
        ({"exploration": 1.0}, r"exploration must be a number in \[0, 1\), got 1.0"),
        ({"exploration": -0.1}, r"exploration must be a number in \[0, 1\)"),
        ({"exploration": True}, r"exploration must be a number in \[0, 1\), got True"),
        ({"num_cycles": 0}, r"num_cycles must be"),
    ],
)
@pytest.mark.parametrize("method", ["csgld", "csghmc"])
def test_bad_cyclical_options_are_named(problem, method, options, message):
    with pytest.raises(ValueError, match=message):
        fit(problem.model, method, **options)


def test_sgld_takes_the_cyclical_schedule_too(problem):
    result = fit(problem.model, "sgld", seed=0, schedule="cyclical", num_burnin=0, **SMALL)
    assert result.num_draws == 4
