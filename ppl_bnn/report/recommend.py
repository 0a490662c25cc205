"""The recommendation per dataset: which contestant to trust, the cheapest one as good, what to
avoid and what could not be judged, by a stated rule.

The rule, for the (method, backend) groups that ran on one dataset:

1. **Basis.** Fidelity to the reference posterior (``ref_w2`` for regression, ``ref_tv`` for
   classification, lower is better) when every reference of the dataset that could be computed
   has a floor (:func:`~ppl_bnn.report.reference_entries.references_pass`: a split whose
   reference is infeasible contributes no fidelity); otherwise the held-out test
   log-likelihood (higher is better). A reference without a floor never decides anything.
2. **Avoid** a group with any cell that is unusable (worse than a constant predictor), that
   diverged, or, against a reference with a floor, whose predictive std where no training input
   lies is below :data:`OVERCONFIDENT` of the reference's on average (over-confident out of
   range).
3. **Not judged**: every other group that is not eligible for ranking
   (:func:`~ppl_bnn.report.ranking.eligible_groups`: a cell failed or timed out, or ran a reduced
   budget) or has no value on the basis.
4. **Trust** the group with the best mean on the basis (on fidelity the geometric mean: the
   mean log distance, since distances are multiplicative and heavy-tailed). Every other group
   is compared with it on the replicates they share by two one-sided tests
   (:mod:`~ppl_bnn.report.equivalence`): **as good** where shown equivalent within the margin,
   **worse** where shown worse by more than the margin, **undecided** where neither (more seeds
   would tell). The margin
   (:class:`~ppl_bnn.report.equivalence.Margins`): on fidelity the log of the larger of
   ``fidelity_ratio`` and 1 + the floor over the trusted group's distance (its geometric mean;
   the floor the mean of its references'), on test log-likelihood ``test_ll_nats``. The
   *cheapest that is as good* is the cheapest shown equivalent (cost: fit and tuning seconds
   without compilation; with it beside). A trusted group whose chains disagree carries the flag
   in its sentence.
5. **As good as the reference** (fidelity with a floor): a ranked group whose distance is shown
   within ``fidelity_ratio`` times the floor (the one-sided upper bound of its mean log ratio
   to the floor below the log of the margin). The sentence names the cheapest; where there is
   none, the closest and its multiple of the floor, and, where that multiple is inside the
   margin on average but not shown to be, that more seeds would tell.

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
from ppl_bnn.report.equivalence import (
    Comparison,
    Margins,
    Outcome,
    compare,
    paired_excess,
    within,
)
from ppl_bnn.report.fidelity import FLOOR_DISTANCES, FLOOR_RATIO
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import SuiteResults, backend_key, method_key
from ppl_bnn.report.ranking import Group, by_replicate, eligible_groups, flagged, reduced
from ppl_bnn.report.reference_entries import (
    REFERENCE_RETRY,
    STATUS_WORDS,
    ReferenceEntry,
    reference_failure,
    references_pass,
)

#: Predictive std below this share of the reference's, where no training input lies, is
#: over-confidence.
OVERCONFIDENT = 0.5
#: The cost columns :func:`with_cost` adds: fit and tuning seconds without compilation, and
#: with it.
COST = "_run_s"
COST_COMPILED = "_run_compiled_s"
#: Chains whose R-hat across them exceeds this disagree.
RHAT_OK = 1.01
#: A distance of zero (two identical samples) is taken as this in a log-ratio.
TINY_DISTANCE = 1e-12
#: Why a dataset is ranked on fidelity (the end of its sentence: "Ranked on ...").
FIDELITY_WHY = "fidelity to the reference posterior, against its floor"


class Grade(StrEnum):
    """A group's standing on one dataset, best first."""

    TRUST = "trust"
    AS_GOOD = "as good"
    UNDECIDED = "undecided"
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
    """One group on one dataset: its grade, its mean ± se on the basis over ``n`` cells, its
    cost without and with compilation, on fidelity its mean ratio to the reference's floor
    (``floor_ratio``) and whether it is shown as good as the reference (``as_reference``), its
    comparison with the trusted group (``comparison``), a convergence flag (``flag``), and
    (avoid, not judged) the reason in a few words, with how many cells it holds for
    (``detail``) or how many times over-confident the group is (``factor``)."""

    group: Group
    grade: Grade
    value: float = math.nan
    se: float = math.nan
    cost: float = math.nan
    reason: str = ""
    detail: str = ""
    factor: float = math.nan
    floor_ratio: float = math.nan
    n: int = 0
    cost_compiled: float = math.nan
    comparison: Comparison | None = None
    as_reference: bool = False
    flag: str = ""

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

    def cost_text(self) -> str:
        """``"1.7 s (3.2 s with compilation)"``, or "" without a cost."""
        if not np.isfinite(self.cost):
            return ""
        text = f"{fmt.number(self.cost)} s"
        if np.isfinite(self.cost_compiled) and self.cost_compiled > self.cost:
            text += f" ({fmt.number(self.cost_compiled)} s with compilation)"
        return text

    def number(self, basis: Basis | None) -> str:
        """The number behind the grade, e.g. ``"W2 to ref. 0.035 ± 0.004, 2.4\u00d7 the floor;
        n = 3; 1.7 s (3.2 s with compilation)"``."""
        parts = []
        if basis is not None and np.isfinite(self.value):
            parts.append(f"{basis.name} {self.value_text()}")
            if self.n:
                parts.append(f"n = {self.n}")
        if self.cost_text():
            parts.append(self.cost_text())
        if self.reason:
            parts.append(self.why)
        if self.flag:
            parts.append(self.flag)
        return "; ".join(parts)


@dataclass(frozen=True)
class Recommendation:
    """The verdict on one dataset (see the module docstring for the rule)."""

    dataset: str
    basis: Basis | None
    standings: tuple[Standing, ...] = field(default=())
    margins: Margins = field(default_factory=Margins)

    def graded(self, *grades: Grade) -> list[Standing]:
        return [s for s in self.standings if s.grade in grades]

    @property
    def trusted(self) -> Standing | None:
        top = self.graded(Grade.TRUST)
        return top[0] if top else None

    @property
    def cheapest_as_good(self) -> Standing | None:
        """The cheapest group shown as good as the trusted one, where it is cheaper."""
        top = self.trusted
        costed = [s for s in self.graded(Grade.AS_GOOD) if np.isfinite(s.cost)]
        if top is None or not costed:
            return None
        cheapest = min(costed, key=lambda s: (s.cost, s.group))
        return cheapest if not np.isfinite(top.cost) or cheapest.cost < top.cost else None

    @property
    def cheapest_as_reference(self) -> Standing | None:
        """The cheapest group shown as good as the reference (see the module docstring)."""
        costed = [s for s in self.standings if s.as_reference and np.isfinite(s.cost)]
        return min(costed, key=lambda s: (s.cost, s.group)) if costed else None

    @property
    def closest(self) -> Standing | None:
        """The ranked group nearest the reference (lowest mean floor ratio), on fidelity."""
        ranked = [s for s in self.graded(Grade.TRUST, Grade.AS_GOOD, Grade.UNDECIDED,
                                         Grade.WORSE) if np.isfinite(s.floor_ratio)]  # fmt: skip
        return min(ranked, key=lambda s: (s.floor_ratio, s.group)) if ranked else None

    def sentence(self) -> str:
        """A few sentences in words and numbers: what to trust, what is as good for less, what
        is undecided, what is as good as the reference, what to avoid and what was not
        judged."""
        parts = []
        top = self.trusted
        if top is None or self.basis is None:
            parts.append("nothing to trust: no contestant could be ranked")
        else:
            n = f"; n = {top.n}" if top.n else ""
            flag = f"; {top.flag}" if top.flag else ""
            parts.append(f"trust {top.name} ({self.basis.name} {top.value_text()}{n}{flag})")
            parts += self._as_good(top)
            undecided = self.graded(Grade.UNDECIDED)
            if undecided:
                pairs = sorted({s.comparison.pairs for s in undecided if s.comparison})
                n_text = ", ".join(str(k) for k in pairs) or "0"
                names = (
                    ", ".join(s.name for s in undecided)
                    if len(undecided) <= 3
                    else f"{len(undecided)} contestants"
                )
                parts.append(f"undecided (n = {n_text}): {names}; more seeds would tell")
        avoid = self.graded(Grade.AVOID)
        if avoid:
            parts.append("avoid " + _grouped(avoid))
        unjudged = self.graded(Grade.NOT_JUDGED)
        if unjudged:
            parts.append("not judged: " + _grouped(unjudged))
        text = "; ".join(parts) + "."
        reference = self._reference_sentence()
        if reference:
            text += f" {fmt.capital(reference)}."
        if self.basis is not None and top is not None:
            text += f" Ranked on {self.basis.why}."
        return fmt.capital(text)

    def _as_good(self, top: Standing) -> list[str]:
        """The sentence parts on the groups shown as good as the trusted one."""
        cheap = self.cheapest_as_good
        rest = [s for s in self.graded(Grade.AS_GOOD) if s != cheap]
        # The others not named one by one: those within the floor are named even so.
        alike = [s.name for s in rest if s.indistinguishable]
        also = f" ({', '.join(alike)} {fmt.INDISTINGUISHABLE})" if alike else ""
        if cheap is not None:
            share = _cost_share(cheap.cost / top.cost) if top.cost > 0 else "less than"
            more = f"; {len(rest)} more as good{also})" if rest else ")"
            return [f"{cheap.name} is as good at {share} the cost ({cheap.value_text()}" + more]
        if rest:
            return [f"{len(rest)} more as good, none cheaper{also}"]
        return []

    def _reference_sentence(self) -> str:
        """On fidelity with a floor: the cheapest group shown as good as the reference, or the
        closest and its multiple of the floor."""
        closest = self.closest
        if closest is None:
            return ""
        within = f"within {fmt.number(self.margins.fidelity_ratio)}\u00d7 its floor"
        cheap = self.cheapest_as_reference
        if cheap is not None:
            cost = f", {cheap.cost_text()}" if cheap.cost_text() else ""
            return f"as good as the reference ({within}) for the least: {cheap.name}{cost}"
        ratio = closest.floor_ratio
        times = f"{fmt.number(ratio, 3 if 1 <= ratio < 1.1 else 2)}\u00d7"
        if closest.n >= 2 and ratio <= self.margins.fidelity_ratio:  # inside, but not shown
            fewer = f" on average, which n = {closest.n} cannot show: more seeds would tell"
        else:
            fewer = f" (n = {closest.n}: more seeds would tell)" if 0 < closest.n < 2 else ""
        return (
            f"none is shown as good as the reference ({within}); the closest, {closest.name}, "
            f"is {times} the floor{fewer}"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: the basis, the margins, the sentence and every standing."""
        return {
            "dataset": self.dataset,
            "basis": None if self.basis is None else self.basis.column,
            "basis_why": None if self.basis is None else self.basis.why,
            "margins": self.margins.as_dict(),
            "sentence": self.sentence(),
            "standings": [_standing_dict(s) for s in self.standings],
        }


def _standing_dict(s: Standing) -> dict[str, object]:
    """One standing, JSON-ready; its comparison with the trusted group where it has one."""
    out: dict[str, object] = {
        "method": s.group[0],
        "backend": s.group[1],
        "grade": str(s.grade),
        "value": _json_number(s.value),
        "se": _json_number(s.se),
        "n": s.n,
        "cost_s": _json_number(s.cost),
        "cost_compiled_s": _json_number(s.cost_compiled),
        "floor_ratio": _json_number(s.floor_ratio),
        "as_reference": s.as_reference,
        "reason": s.why,
        "flag": s.flag,
    }
    if s.comparison is not None:
        c = s.comparison
        out["comparison"] = {
            "mean_excess": _json_number(c.mean),
            "low": _json_number(c.low),
            "high": _json_number(c.high),
            "margin": _json_number(c.margin),
            "pairs": c.pairs,
        }
    return out


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
    (:func:`~ppl_bnn.report.reference_entries.references_pass`) and cells have it, else the test
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


def margins_of(results: SuiteResults) -> Margins:
    """The margins a suite's results were run with (its ``[margins]`` table), else the
    defaults."""
    return Margins.of(results.suite.get("margins"))


def convergence_flag(group: pd.DataFrame) -> str:
    """``"chains disagree (R\u0302 up to 1.04)"`` where a sampler's chains do, else ""."""
    if "rhat_max" not in group:
        return ""
    rhat = group["rhat_max"].astype(float).max()
    return f"chains disagree (R\u0302 up to {fmt.number(rhat, 3)})" if rhat > RHAT_OK else ""


def recommend(
    dataset: str,
    cells: pd.DataFrame,
    references: Sequence[ReferenceEntry],
    margins: Margins | None = None,
) -> Recommendation:
    """The verdict on ``dataset`` from its ``cells`` (with their cost, :func:`with_cost`) and
    its references, judged within ``margins`` (default: :class:`Margins`' defaults)."""
    margins = Margins() if margins is None else margins
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
        judge = _Judge(cells, basis, margins)
        top = judge.top(rankable)
        for key in rankable:
            comparison = None if key == top else judge.against(key, top)
            grade = Grade.TRUST if comparison is None else _GRADES[comparison.outcome]
            group = groups[key]
            values = group[basis.column].astype(float)
            ratio = math.nan
            if basis.column in FLOOR_DISTANCES and FLOOR_RATIO in group:
                ratio = mean_se(group[FLOOR_RATIO])[0]
            standings[key] = Standing(
                key, grade, *mean_se(values), mean_se(group[COST])[0], floor_ratio=ratio,
                n=int(np.isfinite(values).sum()), cost_compiled=mean_se(group[COST_COMPILED])[0],
                comparison=comparison, as_reference=judge.as_reference(group),
                flag=convergence_flag(group),
            )  # fmt: skip

    def order(s: Standing) -> tuple:
        value = s.value if basis is not None and basis.lower else -s.value
        return (
            list(Grade).index(s.grade),
            value if np.isfinite(value) else math.inf,
            method_key(s.group[0]),
            backend_key(s.group[1]),
        )

    return Recommendation(dataset, basis, tuple(sorted(standings.values(), key=order)), margins)


_GRADES = {
    Outcome.AS_GOOD: Grade.AS_GOOD,
    Outcome.WORSE: Grade.WORSE,
    Outcome.UNDECIDED: Grade.UNDECIDED,
}


class _Judge:
    """Rankable groups of one dataset on one basis, compared as the module docstring says."""

    def __init__(self, cells: pd.DataFrame, basis: Basis, margins: Margins) -> None:
        self.cells, self.basis, self.margins = cells, basis, margins
        self.log_ratio = basis.column in FLOOR_DISTANCES
        values = cells[basis.column].astype(float)
        # On a distance the comparison scale is its log: lower is better either way.
        self.scale = np.log(values.clip(lower=TINY_DISTANCE)) if self.log_ratio else values

    def _of(self, group: Group) -> pd.Series:
        return by_replicate(self.cells, self.scale, group)

    def top(self, rankable: set[Group]) -> Group:
        """The group with the best mean on the comparison scale."""
        sign = 1.0 if self.basis.lower else -1.0
        return min(rankable, key=lambda g: (sign * float(self._of(g).mean()), g))

    def margin(self, top: Group) -> float:
        """The margin against ``top`` on the comparison scale (see the module docstring)."""
        if not self.log_ratio:
            return self.margins.test_ll_nats
        ratio = self.margins.fidelity_ratio
        mine = _of_group(self.cells, top)
        if FLOOR_RATIO in mine:
            floors = (mine[self.basis.column] / mine[FLOOR_RATIO]).astype(float)
            floor, distance = mean_se(floors)[0], math.exp(float(self._of(top).mean()))
            if np.isfinite(floor) and distance > 0:
                ratio = max(ratio, 1.0 + floor / distance)
        return math.log(ratio)

    def against(self, group: Group, top: Group) -> Comparison:
        """``group`` against ``top`` on the replicates they share."""
        mine, theirs = self._of(group), self._of(top)
        common = mine.index.intersection(theirs.index)
        a, b = mine.loc[common].to_numpy(float), theirs.loc[common].to_numpy(float)
        # On the log scale the log-ratio is a difference; on a score, higher is better.
        excess = a - b if self.basis.lower else paired_excess(a, b, log_ratio=False)
        return compare(excess, self.margin(top))

    def as_reference(self, group: pd.DataFrame) -> bool:
        """Whether ``group``'s distance is shown within ``fidelity_ratio`` times the floor."""
        if not self.log_ratio or FLOOR_RATIO not in group:
            return False
        ratios = group[FLOOR_RATIO].astype(float).to_numpy()
        ratios = ratios[np.isfinite(ratios)]
        logs = np.log(np.clip(ratios, TINY_DISTANCE, None))
        return within(logs, math.log(self.margins.fidelity_ratio))


def _of_group(cells: pd.DataFrame, group: Group) -> pd.DataFrame:
    return cells[(cells["method"] == group[0]) & (cells["backend"] == group[1])]


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
    out = cells.assign(
        **{
            COST: total - compile_s.fillna(0.0) + tuning.fillna(0.0),
            COST_COMPILED: total + tuning.fillna(0.0),
        }
    )
    if "nll" in out:  # classification: test LL is -NLL (regression cells keep their own)
        test_ll = out.get("test_ll", pd.Series(np.nan, index=out.index)).astype(float)
        out = out.assign(test_ll=test_ll.fillna(-out["nll"].astype(float)))
    return out
