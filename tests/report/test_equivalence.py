"""Equivalence by TOST (:mod:`ppl_bnn.report.equivalence`): its error rates checked by simulation
on paired scores of known truth, and its bad inputs refused by name.

The simulated paired log-ratios have standard deviation :data:`SD`, about the median of the
default suite's fidelity log-ratios between a contestant and the closest one over three seeds
(0.12 on diabetes, 0.21 on gap; sine's 0.54 would need far more seeds than any cap), and the
margin is log 1.25. Each rate is estimated from :data:`DRAWS` simulated comparisons, so its
Monte Carlo standard error is at most 0.011; the bounds allow three of them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppl_bnn.report.equivalence import Outcome, compare, paired_excess

SD = 0.2
MARGIN = math.log(1.25)
DRAWS = 2000
SLACK = 3 * math.sqrt(0.25 / DRAWS)


def _rates(true_log_ratio: float, n: int, seed: int) -> dict[Outcome, float]:
    rng = np.random.default_rng(seed)
    excess = rng.normal(true_log_ratio, SD, size=(DRAWS, n))
    outcomes = [compare(row, MARGIN).outcome for row in excess]
    return {o: outcomes.count(o) / DRAWS for o in Outcome}


@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_twice_as_far_is_almost_never_as_good(n):
    assert _rates(math.log(2.0), n, seed=n)[Outcome.AS_GOOD] <= 0.05 + SLACK


@pytest.mark.parametrize("n", [3, 5, 10, 20])
def test_equal_contestants_are_seldom_worse(n):
    assert _rates(0.0, n, seed=100 + n)[Outcome.WORSE] <= 0.05 + SLACK


def test_at_ten_seeds_equal_contestants_are_as_good_four_times_in_five():
    assert _rates(0.0, 10, seed=7)[Outcome.AS_GOOD] >= 0.80 - SLACK


def test_at_three_seeds_most_equal_contestants_are_undecided():
    """Three seeds cannot show equivalence within 25% at this spread: the truth is reported
    as undecided, not as a tie."""
    rates = _rates(0.0, 3, seed=3)
    assert rates[Outcome.UNDECIDED] > 0.5
    assert rates[Outcome.AS_GOOD] < 0.5


def test_a_margin_sized_difference_is_as_good_at_most_at_the_level():
    """At a true log-ratio equal to the margin, TOST's size: at most 5%."""
    assert _rates(MARGIN, 10, seed=11)[Outcome.AS_GOOD] <= 0.05 + SLACK


def test_worse_means_worse_beyond_the_margin():
    """At a true log-ratio equal to the margin, "worse" at most at the level; inside it, hardly
    ever: a real but small difference is not a reason to avoid a contestant, and so a run cannot
    call "worse" what another run shows as good, but by the two tests' errors."""
    assert _rates(MARGIN, 10, seed=12)[Outcome.WORSE] <= 0.05 + SLACK
    assert _rates(MARGIN / 2, 20, seed=13)[Outcome.WORSE] <= 0.01


def test_twice_as_far_is_shown_worse_at_ten_seeds():
    assert _rates(math.log(2.0), 10, seed=14)[Outcome.WORSE] >= 0.80 - SLACK


def test_fewer_than_two_replicates_are_undecided():
    assert compare(np.array([0.01]), MARGIN).outcome is Outcome.UNDECIDED
    assert compare(np.array([np.nan, np.inf]), MARGIN).pairs == 0


def test_the_excess_is_a_log_ratio_of_distances_or_a_difference_of_scores():
    np.testing.assert_allclose(
        paired_excess(np.array([2.0, 1.0]), np.array([1.0, 1.0]), log_ratio=True),
        [math.log(2.0), 0.0],
    )
    np.testing.assert_allclose(
        paired_excess(np.array([-1.2]), np.array([-1.0]), log_ratio=False), [0.2]
    )


def test_bad_inputs_are_refused_by_name():
    with pytest.raises(ValueError, match="margin must be positive, got 0"):
        compare(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="needs positive distances"):
        paired_excess(np.array([0.0, 1.0]), np.ones(2), log_ratio=True)
    with pytest.raises(ValueError, match=r"one value per replicate each, got \(2,\) and \(3,\)"):
        paired_excess(np.ones(2), np.ones(3), log_ratio=False)
