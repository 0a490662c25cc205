"""Seed handling and the interval arithmetic behind compile-time accounting."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn.seeding import check_seed, child_seed, numpy_generator
from ppl_bnn.timing import union_length

# --- seeding ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2**40, 2**64 - 1, np.int64(7), np.uint32(3)])
def test_check_seed_accepts_non_negative_ints(seed: object) -> None:
    out = check_seed(seed)
    assert out == int(seed)
    assert type(out) is int


@pytest.mark.parametrize(
    "seed", [-1, -(2**40), 2**64, True, False, 1.5, 2.0, "3", None, np.int64(-2)]
)
def test_check_seed_rejects(seed: object) -> None:
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        check_seed(seed)


def test_child_seed_is_deterministic() -> None:
    assert child_seed(5, "svi") == child_seed(5, "svi")
    assert 0 <= child_seed(5, "svi") < 2**32


def test_child_seed_differs_by_purpose() -> None:
    purposes = ["svi", "svi_draws", "mcmc_warmup", "mcmc_sample", "mcmc_chain0", "mcmc_chain1"]
    seeds = {child_seed(0, p) for p in purposes}
    assert len(seeds) == len(purposes)


def test_child_seed_differs_by_seed() -> None:
    seeds = {child_seed(s, "svi") for s in range(20)}
    assert len(seeds) == 20


def test_child_seed_is_not_the_seed_itself() -> None:
    assert child_seed(0, "svi") != 0
    assert child_seed(1, "svi") != 1


def test_child_seed_rejects_bad_seed() -> None:
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        child_seed(-1, "svi")


def test_numpy_generator_streams() -> None:
    a = numpy_generator(3, "x").standard_normal(5)
    np.testing.assert_array_equal(a, numpy_generator(3, "x").standard_normal(5))
    assert not np.array_equal(a, numpy_generator(3, "y").standard_normal(5))
    assert not np.array_equal(a, numpy_generator(4, "x").standard_normal(5))


def test_numpy_generator_leaves_global_state_alone() -> None:
    np.random.seed(123)
    expected = np.random.random(3)
    np.random.seed(123)
    numpy_generator(0, "x").standard_normal(10)
    child_seed(0, "y")
    np.testing.assert_array_equal(np.random.random(3), expected)


# --- union_length -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("intervals", "start", "end", "expected"),
    [
        pytest.param([], 0.0, 10.0, 0.0, id="empty"),
        pytest.param([(1.0, 3.0)], 0.0, 10.0, 2.0, id="single"),
        pytest.param([(1.0, 3.0), (2.0, 5.0)], 0.0, 10.0, 4.0, id="overlapping"),
        pytest.param([(2.0, 5.0), (1.0, 3.0)], 0.0, 10.0, 4.0, id="overlapping-unsorted"),
        pytest.param([(1.0, 8.0), (2.0, 3.0), (4.0, 6.0)], 0.0, 10.0, 7.0, id="nested"),
        pytest.param([(2.0, 3.0), (1.0, 8.0)], 0.0, 10.0, 7.0, id="nested-outer-second"),
        pytest.param([(1.0, 2.0), (4.0, 7.0)], 0.0, 10.0, 4.0, id="disjoint"),
        pytest.param([(1.0, 2.0), (2.0, 3.0)], 0.0, 10.0, 2.0, id="touching"),
        pytest.param([(0.0, 10.0), (1.0, 2.0)], 0.0, 10.0, 10.0, id="covering"),
        pytest.param([(-5.0, 2.0)], 0.0, 10.0, 2.0, id="clipped-left"),
        pytest.param([(8.0, 15.0)], 0.0, 10.0, 2.0, id="clipped-right"),
        pytest.param([(-5.0, 15.0)], 0.0, 10.0, 10.0, id="clipped-both"),
        pytest.param([(-5.0, -1.0), (11.0, 12.0)], 0.0, 10.0, 0.0, id="outside"),
        pytest.param([(-3.0, 0.0), (10.0, 12.0)], 0.0, 10.0, 0.0, id="touching-window"),
        pytest.param(
            [(-2.0, 1.0), (0.5, 2.0), (3.0, 4.0), (3.5, 3.75), (9.0, 20.0)],
            0.0,
            10.0,
            4.0,
            id="mixed",
        ),
        pytest.param([(1.0, 1.0), (2.0, 2.0)], 0.0, 10.0, 0.0, id="zero-length"),
        pytest.param([(1.0, 4.0)], 2.0, 3.0, 1.0, id="window-inside-interval"),
    ],
)
def test_union_length(
    intervals: list[tuple[float, float]], start: float, end: float, expected: float
) -> None:
    assert union_length(intervals, start, end) == pytest.approx(expected, abs=1e-12)


def test_union_length_matches_grid_count() -> None:
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 90, size=30)
    intervals = [(float(a), float(a + rng.integers(1, 15))) for a in starts]
    covered = np.zeros(100, dtype=bool)
    for a, b in intervals:
        covered[int(a) : int(min(b, 80))] = True
    covered[:10] = False
    assert union_length(intervals, 10.0, 80.0) == float(covered[:80].sum())
