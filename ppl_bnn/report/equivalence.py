r"""Whether a contestant is as good as another, worse, or undecided: equivalence shown by two
one-sided tests (TOST; Schuirmann 1987, as bioequivalence uses it) on paired replicates, against
a stated margin.

A lack of evidence is not a tie. With three seeds a paired t-test cannot tell a contestant 13
times further from the reference from the best one, so "the t-test found no difference" cannot
mean "as good". Instead, on the replicates two groups share (``(split, seed)`` pairs), with
:math:`x_r` the contestant's paired excess over the other (:func:`paired_excess`: positive when
it is worse), :math:`\bar x` their mean, :math:`\operatorname{se} = \operatorname{sd}(x) /
\sqrt n` and :math:`t_q` the Student-t quantile with :math:`n - 1` degrees of freedom:

- **as good** where both one-sided tests at :data:`LEVEL` reject a difference beyond the margin
  :math:`\delta`: :math:`\bar x + t_{1-\alpha}\operatorname{se} < \delta` and
  :math:`\bar x - t_{1-\alpha}\operatorname{se} > -\delta` (the :math:`1 - 2\alpha` confidence
  interval lies inside :math:`(-\delta, \delta)`);
- **worse** where the one-sided test at :data:`LEVEL` shows it worse by more than the margin:
  :math:`\bar x - t_{1-\alpha}\operatorname{se} > \delta` (the interval lies above
  :math:`\delta`);
- **undecided** otherwise, and always with fewer than two shared replicates: more replicates
  would tell.

Both decisions are made at the margin, so neither can be reversed by noise alone: to be "as
good" in one run and "worse" in another, a contestant's true excess would have to be inside
:math:`\delta` for one and beyond it for the other, each at an error rate of :data:`LEVEL`. A
difference that is real but smaller than the margin (shown, say, by a paired t-test) is not
"worse": the margin says how close counts as as good.

The excess is a log-ratio for a distance (lower is better; distances are multiplicative and
heavy-tailed, so their ratio is what is compared) and a difference for a score such as the test
log-likelihood in nats per point. Either way the margin is on that scale: :math:`\log 1.25` is
"within 25%".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np
from scipy.stats import t as student_t

#: Level of each one-sided test: the two of equivalence, and the one that shows "worse".
LEVEL = 0.05


@dataclass(frozen=True)
class Margins:
    """How close counts as "as good", per basis of a ranking (set in a suite's ``[margins]``
    table or ``compare(margins=...)``).

    Attributes:
        fidelity_ratio: On a distance to the reference: a contestant within this ratio of the
            trusted one's distance is as good (1.25: within 25%). The margin is the larger of
            it and the reference's own floor as a ratio, 1 + floor / the trusted one's
            distance: two distances that differ by less than the reference's resolution cannot
            be told apart. Also the ratio to the floor within which a contestant is as good as
            the reference.
        test_ll_nats: On held-out test log-likelihood: the difference in nats per test point
            within which a contestant is as good (0.05: the resolution at which the field's UCI
            tables report it, two decimals).
    """

    fidelity_ratio: float = 1.25
    test_ll_nats: float = 0.05

    def __post_init__(self) -> None:
        if not (math.isfinite(self.fidelity_ratio) and self.fidelity_ratio > 1):
            raise ValueError(
                "margins.fidelity_ratio must be a finite ratio above 1, got "
                f"{self.fidelity_ratio!r}"
            )
        if not (math.isfinite(self.test_ll_nats) and self.test_ll_nats > 0):
            raise ValueError(
                f"margins.test_ll_nats must be finite and positive, got {self.test_ll_nats!r}"
            )

    @classmethod
    def of(cls, table: object) -> Margins:
        """Margins from a mapping of their fields (a suite's ``[margins]``), naming an unknown
        one; None or empty: the defaults."""
        if table is None:
            return cls()
        if isinstance(table, Margins):
            return table
        if not isinstance(table, dict):
            raise ValueError(
                f"margins must be a table of fidelity_ratio and test_ll_nats, got {table!r}"
            )
        unknown = sorted(set(table) - {"fidelity_ratio", "test_ll_nats"})
        if unknown:
            raise ValueError(
                f"unknown margin(s) {', '.join(unknown)}; available: fidelity_ratio, test_ll_nats"
            )
        return cls(**{k: float(v) for k, v in table.items()})

    def as_dict(self) -> dict[str, float]:
        return {"fidelity_ratio": self.fidelity_ratio, "test_ll_nats": self.test_ll_nats}


class Outcome(StrEnum):
    """A contestant against another."""

    AS_GOOD = "as good"
    WORSE = "worse"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Comparison:
    """The paired comparison of a contestant with another.

    Attributes:
        outcome: As good, worse or undecided (see the module docstring).
        mean: Mean paired excess :math:`\\bar x` (positive: the contestant is worse).
        low, high: The :math:`1 - 2\\alpha` confidence interval of the mean excess, the one
            TOST reads (NaN with fewer than two replicates).
        margin: The margin :math:`\\delta` it was judged against.
        pairs: Shared replicates.
    """

    outcome: Outcome
    mean: float
    low: float
    high: float
    margin: float
    pairs: int

    @property
    def ratio(self) -> float:
        """The mean excess as a ratio, for an excess that is a log-ratio."""
        return math.exp(self.mean)


@lru_cache(maxsize=256)
def _quantile(q: float, dof: int) -> float:
    return float(student_t.ppf(q, dof))


def paired_excess(contestant: np.ndarray, other: np.ndarray, *, log_ratio: bool) -> np.ndarray:
    """Per shared replicate, how much worse ``contestant`` is than ``other``: the log-ratio of
    two distances (lower is better, ``log_ratio``) or the difference of two scores (higher is
    better: ``other - contestant``)."""
    contestant, other = np.asarray(contestant, float), np.asarray(other, float)
    if contestant.shape != other.shape:
        raise ValueError(
            f"paired scores must have one value per replicate each, got {contestant.shape} and "
            f"{other.shape}"
        )
    if log_ratio:
        if np.any(contestant <= 0) or np.any(other <= 0):
            raise ValueError("a log-ratio of distances needs positive distances")
        return np.log(contestant) - np.log(other)
    return other - contestant


def within(excess: np.ndarray, margin: float) -> bool:
    """Whether the mean of ``excess`` is shown below ``margin``: the one-sided test at
    :data:`LEVEL` (the upper TOST bound), with at least two finite values."""
    x = np.asarray(excess, float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return False
    high = x.mean() + _quantile(1.0 - LEVEL, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return bool(high < margin)


def compare(excess: np.ndarray, margin: float) -> Comparison:
    """As good, worse or undecided from the paired excesses ``excess`` (finite values only)
    and the margin ``margin`` on their scale (see the module docstring)."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin!r}")
    x = np.asarray(excess, float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Comparison(Outcome.UNDECIDED, math.nan, math.nan, math.nan, margin, 0)
    mean = float(x.mean())
    if n < 2:
        return Comparison(Outcome.UNDECIDED, mean, math.nan, math.nan, margin, n)
    se = float(x.std(ddof=1) / math.sqrt(n))
    half = _quantile(1.0 - LEVEL, n - 1) * se
    low, high = mean - half, mean + half
    if -margin < low and high < margin:
        outcome = Outcome.AS_GOOD
    elif low > margin:
        outcome = Outcome.WORSE
    else:
        outcome = Outcome.UNDECIDED
    return Comparison(outcome, mean, low, high, margin, n)
