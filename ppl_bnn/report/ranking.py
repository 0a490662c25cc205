"""Which (method, backend) is best on a metric, and only when the data say so.

Replicates are the (split, seed) pairs a suite runs. Two groups are compared on the replicates
both have, by the paired differences :math:`d_r` of their scores (the metric, its negative when
lower is better, or minus the distance to a nominal value such as 95% coverage). With
:math:`\\bar d` their mean and :math:`\\operatorname{se} = \\operatorname{sd}(d) / \\sqrt{n}`:

- the group with the best mean is **best** only if a paired t-test against the runner-up
  rejects a zero difference at the 5% level (two-sided): :math:`\\bar d > t_{0.975, n-1}
  \\operatorname{se}`, with n >= 2 paired replicates (:math:`t_{0.975, n-1}` is 12.7 for two
  replicates, 4.30 for three, 2.09 for twenty: two standard errors are too few with a handful of
  replicates, where se itself is poorly known);
- otherwise the top is a **tie** between every group whose paired difference to the top does not
  pass that test (or that shares fewer than two replicates with it).

Only *eligible* groups are ranked: every cell finished ``ok``, none is flagged as unusable
(worse than a constant predictor), and none ran a reduced budget (those are never ranked against
full-budget ones).

Fidelity (the distances to a reference posterior) is ranked only on a dataset whose every
reference that could be computed has a floor
(:func:`~ppl_bnn.report.reference_entries.references_pass`):
a reference without one gives no best, no tie and no standing, anywhere in the report; its
distances are shown apart, marked "not ranked: reference has no floor".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from ppl_bnn.report.glossary import better

Group = tuple[str, str]
#: Two-sided level of the paired t-test a lead must pass to count.
LEVEL = 0.05
REPLICATE = ("split", "seed")


@dataclass(frozen=True)
class Ranking:
    """The verdict on one metric among eligible groups.

    Attributes:
        column: The metric.
        top: The group with the best mean (the clearly best one, or the tie group's top).
        best: The clearly best group, or None.
        tied: Groups tied for best when there is no clear best (empty otherwise).
        runner_up: The group with the second-best mean.
        lead: Mean paired score difference of the top over the runner-up (> 0 means ahead).
        lead_se: Its standard error (NaN with fewer than two pairs).
        pairs: Replicates the two share.
    """

    column: str
    top: Group | None = None
    best: Group | None = None
    tied: frozenset[Group] = field(default_factory=frozenset)
    runner_up: Group | None = None
    lead: float = math.nan
    lead_se: float = math.nan
    pairs: int = 0


def flagged(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell's predictive is flagged as unusable."""
    if "flags" not in cells:
        return pd.Series(False, index=cells.index)
    return cells["flags"].notna() & (cells["flags"].astype(str) != "")


def reduced(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell ran a reduced budget (it carries a budget note)."""
    if "budget_note" not in cells:
        return pd.Series(False, index=cells.index)
    return cells["budget_note"].notna()


def eligible_groups(cells: pd.DataFrame) -> set[Group]:
    """(method, backend) groups whose every cell is ``ok``, unflagged and full-budget."""
    good = (cells["status"] == "ok") & ~flagged(cells) & ~reduced(cells)
    ok = good.groupby([cells["method"], cells["backend"]]).all()
    return {(str(m), str(b)) for (m, b), value in ok.items() if value}


def scores(cells: pd.DataFrame, column: str) -> pd.Series | None:
    """The column as a score where higher is better (None if the metric has no direction)."""
    direction = better(column)
    if direction is None or column not in cells:
        return None
    values = cells[column].astype(float)
    if direction == "higher":
        return values
    if direction == "lower":
        return -values
    return -(values - float(direction)).abs()


def by_replicate(cells: pd.DataFrame, score: pd.Series, group: Group) -> pd.Series:
    """``group``'s finite ``score`` values keyed by replicate (:data:`REPLICATE`), one each."""
    mask = (cells["method"] == group[0]) & (cells["backend"] == group[1]) & np.isfinite(score)
    keyed = score[mask].set_axis(pd.MultiIndex.from_frame(cells.loc[mask, list(REPLICATE)]))
    return keyed[~keyed.index.duplicated()]


def paired_difference(
    cells: pd.DataFrame, score: pd.Series, a: Group, b: Group
) -> tuple[float, float, int]:
    """Mean score of ``a`` minus ``b`` over shared replicates, its standard error, and the
    number of pairs (NaN standard error with fewer than two)."""
    left, right = by_replicate(cells, score, a), by_replicate(cells, score, b)
    common = left.index.intersection(right.index)
    d = (left.loc[common] - right.loc[common]).to_numpy(dtype=float)
    n = len(d)
    if n == 0:
        return math.nan, math.nan, 0
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return float(d.mean()), se, n


def critical_value(pairs: int) -> float:
    """Paired standard errors a difference over ``pairs`` replicates must exceed to be more than
    noise: the Student-t quantile :math:`t_{1 - \\mathrm{LEVEL}/2,\\ n-1}` (inf below two pairs)."""
    if pairs < 2:
        return math.inf
    return float(student_t.ppf(1.0 - LEVEL / 2.0, pairs - 1))


def clear(difference: float, se: float, pairs: int) -> bool:
    """Whether a paired difference is more than noise (its magnitude, either sign)."""
    return bool(np.isfinite(se)) and abs(difference) > critical_value(pairs) * se


def _clear(lead: float, se: float, pairs: int) -> bool:
    return lead > 0 and clear(lead, se, pairs)


def rank(cells: pd.DataFrame, column: str, eligible: set[Group] | None = None) -> Ranking | None:
    """The verdict on ``column`` among ``eligible`` groups of ``cells`` (one dataset).

    Returns None when the metric has no direction or fewer than two groups have values.
    """
    score = scores(cells, column)
    if score is None:
        return None
    groups = eligible_groups(cells) if eligible is None else eligible
    means = {
        g: float(m)
        for g in groups
        if np.isfinite(
            m := score[(cells["method"] == g[0]) & (cells["backend"] == g[1])].mean(skipna=True)
        )
    }
    if len(means) < 2:
        return None
    order = sorted(means, key=lambda g: (-means[g], g))
    top, runner_up = order[0], order[1]
    lead, se, pairs = paired_difference(cells, score, top, runner_up)
    if _clear(lead, se, pairs):
        return Ranking(
            column, top=top, best=top, runner_up=runner_up, lead=lead, lead_se=se, pairs=pairs
        )
    tied = {top}
    for other in order[1:]:
        gap, gap_se, n = paired_difference(cells, score, top, other)
        if not _clear(gap, gap_se, n):
            tied.add(other)
    return Ranking(
        column,
        top=top,
        tied=frozenset(tied),
        runner_up=runner_up,
        lead=lead,
        lead_se=se,
        pairs=pairs,
    )
