"""The recommendation per dataset: which contestant to trust, the cheapest one as good, what to
avoid and what could not be judged, by a stated rule.

The rule, for the (method, backend) groups that ran on one dataset:

1. **Basis.** Fidelity to the reference posterior (``ref_w2`` for regression, ``ref_tv`` for
   classification, lower is better) when every reference of the dataset that could be computed
   has a floor (:func:`~ppl_bnn.report.load.references_pass`: a split whose reference is
   infeasible contributes no fidelity); otherwise the held-out test log-likelihood (higher is
   better). A reference without a floor never decides anything.
2. **Avoid** a group with any cell that is unusable (worse than a constant predictor), that
   diverged, or, against a reference with a floor, whose predictive std where no training input
   lies is below :data:`OVERCONFIDENT` of the reference's on average (over-confident out of
   range).
3. **Not judged**: every other group that is not eligible for ranking
   (:func:`~ppl_bnn.report.ranking.eligible_groups`: a cell failed or timed out, or ran a reduced
   budget) or has no value on the basis.
4. **Trust** the group with the best mean on the basis; the others of its tie group (the paired
   t-test of :func:`~ppl_bnn.report.ranking.rank` cannot tell them from it) are **as good**;
   the *cheapest that is as good* is the tie group's cheapest (cost: fit and tuning seconds
   without compilation). The rest are **worse**.

On fidelity, each ranked group's mean ratio of its distance to its reference's floor
(:data:`~ppl_bnn.report.fidelity.FLOOR_RATIO`) is kept beside its number: the sentence says
"k\u00d7 the floor", or, at most 1, that it is indistinguishable from the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import pandas as pd

from ppl_bnn.bench.record import FAILED
from ppl_bnn.report import fmt
from ppl_bnn.report.fidelity import FLOOR_DISTANCES, FLOOR_RATIO
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import (
    REFERENCE_RETRY,
    STATUS_WORDS,
    ReferenceEntry,
    backend_key,
    method_key,
    reference_failure,
    references_pass,
)
from ppl_bnn.report.ranking import Group, eligible_groups, flagged, rank, reduced

#: Predictive std below this share of the reference's, where no training input lies, is
#: over-confidence.
OVERCONFIDENT = 0.5
#: The cost column :func:`with_cost` adds: fit and tuning seconds without compilation.
COST = "_run_s"
#: Why a dataset is ranked on fidelity (the end of its sentence: "Ranked on ...").
FIDELITY_WHY = "fidelity to the reference posterior, against its floor"


class Grade(StrEnum):
    """A group's standing on one dataset, best first."""

    TRUST = "trust"
    AS_GOOD = "as good"
    WORSE = "worse"
    AVOID = "avoid"
    NOT_JUDGED = "not judged"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class Basis:
    """What the ranking is on: a metric, its name, its direction, and why it was chosen."""

    column: str
    name: str
    lower: bool
    why: str


@dataclass(frozen=True)
class Standing:
    """One group on one dataset: its grade, its mean ± se on the basis, its cost, on fidelity
    its mean ratio to the reference's floor (``floor_ratio``), and (avoid, not judged) the
    reason in a few words, with how many cells it holds for (``detail``) or how many times
    over-confident the group is (``factor``)."""

    group: Group
    grade: Grade
    value: float = math.nan
    se: float = math.nan
    cost: float = math.nan
    reason: str = ""
    detail: str = ""
    factor: float = math.nan
    floor_ratio: float = math.nan

    @property
    def name(self) -> str:
        return f"{self.group[0]}/{self.group[1]}"

    @property
    def why(self) -> str:
        """The reason with its detail: ``"25x over-confident out of range"``, ``"diverged in 1
        of 3 cells"``."""
        if np.isfinite(self.factor):
            return f"{_times(self.factor)} {self.reason}"
        return f"{self.reason} in {self.detail}" if self.detail else self.reason

    @property
    def against_floor(self) -> str:
        """Its distance against the floor: ``"2.4\u00d7 the floor"``, ``"indistinguishable from
        the reference"``, or "" (no floor, or not ranked on fidelity)."""
        return fmt.against_floor(self.floor_ratio)

    @property
    def indistinguishable(self) -> bool:
        """Whether its mean distance is within the reference's floor."""
        return bool(np.isfinite(self.floor_ratio) and self.floor_ratio <= 1)

    def value_text(self) -> str:
        """Its mean ± se on the basis, with the floor where it has one: ``"0.035 ± 0.004,
        2.4\u00d7 the floor"``."""
        floor = self.against_floor
        return fmt.mean_se(self.value, self.se) + (f", {floor}" if floor else "")

    def number(self, basis: Basis | None) -> str:
        """The number behind the grade, e.g. ``"W2 to ref. 0.035 ± 0.004, 2.4\u00d7 the floor;
        1.7 s"``."""
        parts = []
        if basis is not None and np.isfinite(self.value):
            parts.append(f"{basis.name} {self.value_text()}")
        if np.isfinite(self.cost):
            parts.append(f"{fmt.number(self.cost)} s")
        if self.reason:
            parts.append(self.why)
        return "; ".join(parts)


@dataclass(frozen=True)
class Recommendation:
    """The verdict on one dataset (see the module docstring for the rule)."""

    dataset: str
    basis: Basis | None
    standings: tuple[Standing, ...] = field(default=())

    def graded(self, *grades: Grade) -> list[Standing]:
        return [s for s in self.standings if s.grade in grades]

    @property
    def trusted(self) -> Standing | None:
        top = self.graded(Grade.TRUST)
        return top[0] if top else None

    @property
    def cheapest_as_good(self) -> Standing | None:
        """The tie group's cheapest member, where it is not the trusted one."""
        tie = self.graded(Grade.TRUST, Grade.AS_GOOD)
        costed = [s for s in tie if np.isfinite(s.cost)]
        if not costed:
            return None
        cheapest = min(costed, key=lambda s: (s.cost, s.group))
        return None if cheapest.grade == Grade.TRUST else cheapest

    def sentence(self) -> str:
        """One or two sentences in words and numbers."""
        parts = []
        top = self.trusted
        if top is None or self.basis is None:
            parts.append("nothing to trust: no contestant could be ranked")
        else:
            parts.append(f"trust {top.name} ({self.basis.name} {top.value_text()})")
            cheap = self.cheapest_as_good
            rest = [s for s in self.graded(Grade.AS_GOOD) if s != cheap]
            # The ties not named one by one: those within the floor are named even so.
            alike = [s.name for s in rest if s.indistinguishable]
            also = f" ({', '.join(alike)} {fmt.INDISTINGUISHABLE})" if alike else ""
            if cheap is not None:
                parts.append(
                    f"{cheap.name} ties with it at {_cost_share(cheap.cost / top.cost)} the cost "
                    f"({cheap.value_text()}" + (f"; {len(rest)} more tie{also})" if rest else ")")
                )
            elif rest:
                parts.append(f"{len(rest)} more tie, none cheaper{also}")
        avoid = self.graded(Grade.AVOID)
        if avoid:
            parts.append("avoid " + _grouped(avoid))
        unjudged = self.graded(Grade.NOT_JUDGED)
        if unjudged:
            parts.append("not judged: " + _grouped(unjudged))
        text = "; ".join(parts) + "."
        if self.basis is not None and top is not None:
            text += f" Ranked on {self.basis.why}."
        return fmt.capital(text)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: the basis, the sentence and every standing."""
        return {
            "dataset": self.dataset,
            "basis": None if self.basis is None else self.basis.column,
            "basis_why": None if self.basis is None else self.basis.why,
            "sentence": self.sentence(),
            "standings": [
                {
                    "method": s.group[0],
                    "backend": s.group[1],
                    "grade": str(s.grade),
                    "value": _json_number(s.value),
                    "se": _json_number(s.se),
                    "cost_s": _json_number(s.cost),
                    "floor_ratio": _json_number(s.floor_ratio),
                    "reason": s.why,
                }
                for s in self.standings
            ],
        }


def _json_number(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _times(factor: float) -> str:
    return f"{fmt.number(round(factor, 1), 2)}\u00d7"


def _cost_share(ratio: float) -> str:
    """A cheaper contestant's cost relative to another's: ``"1/5 of"`` or ``"0.62x"``."""
    if ratio <= 0.5:
        return f"1/{round(1.0 / ratio)} of"
    return f"{fmt.number(ratio, 2)}\u00d7"


def _grouped(standings: Sequence[Standing]) -> str:
    """Names grouped by reason: ``"a, b (2.1-25x over-confident out of range); c (diverged)"``;
    the cell counts are left to each standing's :attr:`Standing.why`."""
    by_reason: dict[str, list[Standing]] = {}
    for s in standings:
        by_reason.setdefault(s.reason, []).append(s)
    parts = []
    for reason, members in by_reason.items():
        factors = [s.factor for s in members if np.isfinite(s.factor)]
        if factors:
            low, high = _times(min(factors)), _times(max(factors))
            span = high if low == high else f"{low[:-1]}\u2013{high}"
            reason = f"{span} {reason}"
        parts.append(f"{', '.join(s.name for s in members)} ({reason})")
    return "; ".join(parts)


def basis_of(cells: pd.DataFrame, references: Sequence[ReferenceEntry]) -> Basis | None:
    """Fidelity where the dataset's references have a floor
    (:func:`~ppl_bnn.report.load.references_pass`) and cells have it, else the test
    log-likelihood; None where neither has a value."""
    regression = "rmse" in cells and cells["rmse"].notna().any()
    fidelity = "ref_w2" if regression else "ref_tv"
    if references_pass(references) and fidelity in cells and cells[fidelity].notna().any():
        return Basis(fidelity, label(fidelity), True, FIDELITY_WHY)
    if "test_ll" not in cells or not cells["test_ll"].notna().any():
        return None
    if not references:
        why = "held-out test log-likelihood (no reference posterior)"
    elif any(e.usable for e in references):
        why = "held-out test log-likelihood (the reference has no floor)"
    elif failure := reference_failure(references):
        why = f"held-out test log-likelihood: {failure}; {REFERENCE_RETRY}"
    else:
        why = "held-out test log-likelihood (no reference could be computed)"
    return Basis("test_ll", "test LL", False, why)


def _avoid(key: Group, group: pd.DataFrame, passed: bool) -> Standing | None:
    """The group's standing as one to avoid, or None."""
    cells = f"{{}} of {len(group)} cells"
    bad = flagged(group)
    if bad.any():
        detail = cells.format(int(bad.sum()))
        return Standing(key, Grade.AVOID, reason="worse than a constant predictor", detail=detail)
    diverged = group["status"] == "diverged"
    if diverged.any():
        detail = cells.format(int(diverged.sum()))
        return Standing(key, Grade.AVOID, reason="diverged", detail=detail)
    if passed and "ref_std_ratio_out" in group:
        ratio = float(group["ref_std_ratio_out"].astype(float).mean())
        if ratio < OVERCONFIDENT:
            reason = "over-confident out of range"
            return Standing(key, Grade.AVOID, reason=reason, factor=1.0 / ratio)
    return None


def _unjudged(key: Group, group: pd.DataFrame, column: str | None) -> Standing:
    """The group's standing as one that could not be judged, with the reason."""
    n = len(group)
    for status in FAILED:
        words = STATUS_WORDS[status]
        hits = int((group["status"] == status).sum())
        if hits:
            return Standing(key, Grade.NOT_JUDGED, reason=words, detail=f"{hits} of {n} cells")
    if reduced(group).any():
        return Standing(key, Grade.NOT_JUDGED, reason="reduced budget")
    other = group["status"] != "ok"
    if other.any():
        statuses = ", ".join(sorted(set(group.loc[other, "status"].astype(str))))
        return Standing(key, Grade.NOT_JUDGED, reason=f"{statuses} cells")
    return Standing(key, Grade.NOT_JUDGED, reason=f"no {column or 'metric'}")


def recommend(
    dataset: str, cells: pd.DataFrame, references: Sequence[ReferenceEntry]
) -> Recommendation:
    """The verdict on ``dataset`` from its ``cells`` (with their cost, :func:`with_cost`) and
    its references."""
    basis = basis_of(cells, references)
    passed = references_pass(references)
    eligible = eligible_groups(cells)
    groups = {(str(m), str(b)): g for (m, b), g in cells.groupby(["method", "backend"], sort=False)}
    standings: dict[Group, Standing] = {}
    rankable: set[Group] = set()
    for key, group in groups.items():
        avoid = _avoid(key, group, passed)
        if avoid is not None:
            standings[key] = avoid
        elif key not in eligible or basis is None or not group[basis.column].notna().any():
            standings[key] = _unjudged(key, group, None if basis is None else basis.name)
        else:
            rankable.add(key)
    if basis is not None and rankable:
        tie, top = _tie_group(cells, basis, rankable)
        for key in rankable:
            grade = Grade.TRUST if key == top else Grade.AS_GOOD if key in tie else Grade.WORSE
            values = groups[key][basis.column].astype(float)
            cost = mean_se(groups[key][COST])[0]
            ratio = math.nan
            if basis.column in FLOOR_DISTANCES and FLOOR_RATIO in groups[key]:
                ratio = mean_se(groups[key][FLOOR_RATIO])[0]
            standings[key] = Standing(key, grade, *mean_se(values), cost, floor_ratio=ratio)

    def order(s: Standing) -> tuple:
        value = s.value if basis is not None and basis.lower else -s.value
        return (
            list(Grade).index(s.grade),
            value if np.isfinite(value) else math.inf,
            method_key(s.group[0]),
            backend_key(s.group[1]),
        )

    return Recommendation(dataset, basis, tuple(sorted(standings.values(), key=order)))


def _tie_group(cells: pd.DataFrame, basis: Basis, rankable: set[Group]) -> tuple[set[Group], Group]:
    """The groups tied for best and the one with the best mean."""
    verdict = rank(cells, basis.column, rankable)
    if verdict is None or verdict.top is None:  # a single group with a value
        (only,) = rankable
        return {only}, only
    if verdict.best is not None:
        return {verdict.best}, verdict.best
    return set(verdict.tied), verdict.top


def mean_se(values: pd.Series) -> tuple[float, float]:
    """Mean and standard error of the finite values (NaN standard error for one value)."""
    v = values.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return math.nan, math.nan
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan


def with_cost(cells: pd.DataFrame) -> pd.DataFrame:
    """``cells`` with :data:`COST` added, and, for classification, the test log-likelihood as
    -NLL where a cell has none."""
    total = cells.get("time_total", pd.Series(np.nan, index=cells.index)).astype(float)
    compile_s = cells.get("time_compile", pd.Series(0.0, index=cells.index)).astype(float)
    # A tuned contestant's cost includes its tuning: the fits on the validation split.
    tuning = cells.get("time_tuning", pd.Series(0.0, index=cells.index)).astype(float)
    out = cells.assign(**{COST: total - compile_s.fillna(0.0) + tuning.fillna(0.0)})
    if "nll" in out:  # classification: test LL is -NLL (regression cells keep their own)
        test_ll = out.get("test_ll", pd.Series(np.nan, index=out.index)).astype(float)
        out = out.assign(test_ll=test_ll.fillna(-out["nll"].astype(float)))
    return out
