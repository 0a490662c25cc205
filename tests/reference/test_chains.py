"""The chain ensemble judged chain by chain: stuck chains dropped and counted, and the floor
(two halves of the chains scored against each other) shrinking as chains are added."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppl_bnn.reference.chains import (
    FROZEN_STEP_SHARE,
    MIN_CHAINS,
    ChainAssessment,
    floor,
    stuck_chains,
)


def _ensemble(num_chains: int, seed: int, draws: int = 200, points: int = 30) -> tuple:
    """A chain ensemble of a known posterior: each chain explores its own mode (an offset of
    the predictive drawn from N(0, 0.3^2)) with draws N(mode, 0.1^2) around it; noise 0.5."""
    rng = np.random.default_rng(seed)
    modes = 0.3 * rng.normal(size=(num_chains, 1, points))
    f = modes + 0.1 * rng.normal(size=(num_chains, draws, points))
    sigma = np.full((num_chains, draws), 0.5)
    return f, sigma


def test_a_floor_needs_four_kept_chains() -> None:
    f, sigma = _ensemble(MIN_CHAINS, seed=0)
    for split in ("halves", "random"):
        assert floor(list(range(MIN_CHAINS - 1)), split, f=f, sigma=sigma) == {}
        assert floor(list(range(MIN_CHAINS)), split, f=f, sigma=sigma)["ref_w2"] > 0


def test_the_floor_shrinks_as_chains_are_added() -> None:
    """Between two halves of K chains the modes differ by about sqrt(2 / (K/2)) x 0.3: the floor
    falls like 1/sqrt(K), down to the Monte Carlo part, which the random split measures."""
    found = {}
    for num_chains in (8, 32, 128):
        values = [
            floor(list(range(num_chains)), f=f, sigma=s)["ref_w2"]
            for f, s in (_ensemble(num_chains, seed) for seed in range(3))
        ]
        found[num_chains] = float(np.mean(values))
    assert found[8] > found[32] > found[128]
    # 16 times the chains: the chain part about 4 times smaller (the MC part stays).
    assert found[128] < found[8] / 2.5
    # The random split sees only the Monte Carlo part: far below the halves with few chains.
    f, s = _ensemble(8, seed=0)
    halves, random = (floor(list(range(8)), split, f=f, sigma=s) for split in ("halves", "random"))
    assert random["ref_w2"] < halves["ref_w2"] / 3


def test_the_random_split_depends_on_its_seed_and_the_halves_do_not() -> None:
    f, s = _ensemble(8, seed=0)
    halves = [floor(list(range(8)), f=f, sigma=s, seed=seed)["ref_w2"] for seed in (0, 1)]
    random = [floor(list(range(8)), "random", f=f, sigma=s, seed=seed)["ref_w2"] for seed in (0, 1)]
    assert halves[0] == halves[1] and random[0] != random[1]


def test_the_classification_floor_is_total_variation_and_agreement() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(8, 1, 20, 3)) + 0.1 * rng.normal(size=(8, 50, 20, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    halves, random = (floor(list(range(8)), split, probs=probs) for split in ("halves", "random"))
    assert set(halves) == {"ref_tv", "ref_agreement"} and 0 < halves["ref_tv"] < 1
    assert random["ref_tv"] < halves["ref_tv"]


def test_a_floor_without_draws_or_of_an_unknown_split_is_refused() -> None:
    with pytest.raises(ValueError, match="needs f and sigma"):
        floor(list(range(8)))
    f, s = _ensemble(8, seed=0)
    with pytest.raises(ValueError, match="unknown split 'chains': one of halves, random"):
        floor(list(range(8)), "chains", f=f, sigma=s)


def test_frozen_non_finite_and_worse_than_constant_chains_are_dropped_with_the_reason() -> None:
    steps = np.array([0.5, 0.4, 0.0, 0.6, FROZEN_STEP_SHARE * 0.1, np.nan, 0.5])
    finite = np.array([True, False, True, True, True, True, True])
    train_ll = np.tile(np.array([[0.3], [0.3], [0.3], [-2.0], [0.3], [0.3], [0.3]]), (1, 10))
    dropped = stuck_chains(steps, finite, train_ll, baseline=-1.42)
    assert sorted(dropped) == [1, 2, 3, 4, 5]
    assert dropped[1] == "a draw is not finite"
    assert dropped[2].startswith("frozen: step size 0 ") and dropped[5].startswith("frozen")
    assert dropped[4].startswith("frozen")
    assert dropped[3].startswith("worse than the constant predictor on its training data")
    # Without step sizes (a sampler that drops frozen chains itself) the others still apply.
    assert sorted(stuck_chains(None, finite, train_ll, baseline=-1.42)) == [1, 3]


def test_the_assessment_reports_its_floor_in_original_units_and_counts_the_chains() -> None:
    found = ChainAssessment(
        num_chains=6, kept=[0, 1, 2, 4], dropped={3: "frozen", 5: "a draw is not finite"},
        per_chain={"rhat": [1.0, 1.1, 1.2, 9.0, 1.3, 9.0], "ess": [50, 40, 30, 1, 20, 1]},
        rhat_across=1.4, floor={"ref_w2": 0.01}, floor_random={"ref_w2": 0.004},
    ).metrics(scale=9.0)  # fmt: skip
    assert found["chains_run"] == 6 and found["chains_kept"] == 4
    assert found["floor_w2"] == pytest.approx(0.09) and found["floor_w2_std"] == 0.01
    assert found["floor_w2_random"] == pytest.approx(0.036)
    assert found["rhat_within_median"] == pytest.approx(1.15)  # of the kept chains only
    assert found["ess_within_median"] == 35 and found["rhat_across"] == 1.4
    assert math.isnan(ChainAssessment(4, [], {}).metrics()["rhat_within_median"])
