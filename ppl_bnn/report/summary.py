"""The report's first section: which approximation to trust on each dataset, for what cost.

Everything here is generated from the stored results. Per dataset it gives the reference
posterior's verdict, the recommendation (:mod:`.recommend`), one evidence table (each
contestant's standing, fidelity, test log-likelihood, calibration, out-of-range std, cost and
flags: unusable fits, over-confidence, divergences, sampler chains that disagree, failures,
reduced budgets) and the Pareto figure of quality against cost. Only eligible (method, backend)
pairs are drawn filled and joined on the front (every cell ok, unflagged, full budget; see
:mod:`.ranking`).

Fidelity to the reference posterior is a column of the evidence table and an axis of the front
only where every reference of the dataset that could be computed has a floor
(:func:`~ppl_bnn.report.reference_entries.references_pass`, the rule the recommendation
follows). Each contestant's distance is shown beside the floor ("2.4\u00d7 the floor"), and a
distance within it reads "indistinguishable from the reference". Where a reference has no
floor, the dataset's subsection says "not ranked: reference has no floor", with why (the chains
kept) and what to try; its distances are shown only apart, unranked
(:func:`~ppl_bnn.report.tables.fidelity_table`).
Without a reference with a floor, the front and the standings use the test log-likelihood and
cost alone.

Cost is the fit's wall time without compilation (``total - compile``): compiling once is JAX's
and torch's price, paid again only in a new process with no compilation cache; it is drawn apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import LogLocator

from ppl_bnn.report import fmt
from ppl_bnn.report.document import Figure, Inline, Link, Paragraph, Section, Strong, Table, slug
from ppl_bnn.report.equivalence import Margins
from ppl_bnn.report.fidelity import FLOOR_DISTANCES, FLOOR_RATIO
from ppl_bnn.report.figures import figure_of, legend_methods_backends, plain_log_ticks
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import SuiteResults, backend_key, method_key
from ppl_bnn.report.ranking import Group, eligible_groups, flagged, reduced
from ppl_bnn.report.recommend import (
    COST,
    OVERCONFIDENT,
    Grade,
    Recommendation,
    Standing,
    convergence_flag,
    margins_of,
    mean_se,
    with_cost,
)
from ppl_bnn.report.reference_entries import (
    REFERENCE_RETRY,
    STATUS_WORDS,
    ReferenceEntry,
    reference_failure,
    references_pass,
)
from ppl_bnn.report.reference_tables import (
    NOT_RANKED,
    ensemble_description,
    floor_remedy,
    no_floor_detail,
)
from ppl_bnn.report.stats import WITH_METRICS
from ppl_bnn.report.style import backend_marker, method_color
from ppl_bnn.report.sweeps import summary_note
from ppl_bnn.report.tables import BUDGET_MARK

#: What a dataset without a reference with a floor is ranked and drawn on.
TEST_ONLY = "the front and the ranking use test log-likelihood and cost alone"


@dataclass(frozen=True)
class Axis:
    """One quality axis of the front: a column, its label and whether lower is better."""

    column: str
    name: str
    lower: bool


@dataclass(frozen=True)
class Point:
    """One (method, backend) on a quality-cost plane: means and standard errors over cells."""

    group: Group
    cost: float
    cost_se: float
    compile_s: float
    quality: float
    quality_se: float
    eligible: bool


def points(cells: pd.DataFrame, column: str) -> list[Point]:
    """One point per (method, backend) with cost and ``column`` means, in canonical order."""
    cells = with_cost(cells)
    if column not in cells:
        return []
    eligible = eligible_groups(cells)
    used = cells[cells["status"].isin(WITH_METRICS) & ~flagged(cells)]
    out = []
    for (method, backend), group in used.groupby(["method", "backend"], sort=False):
        cost, cost_se = mean_se(group[COST])
        quality, quality_se = mean_se(group[column])
        if not (np.isfinite(cost) and np.isfinite(quality) and cost > 0):
            continue
        compile_s = mean_se(group.get("time_compile", pd.Series(dtype=float)))[0]
        key = (str(method), str(backend))
        out.append(Point(key, cost, cost_se, compile_s, quality, quality_se, key in eligible))
    return sorted(out, key=lambda p: (method_key(p.group[0]), backend_key(p.group[1])))


def pareto_front(pts: Sequence[Point], lower: bool) -> list[Point]:
    """The eligible points no other eligible point beats on both cost and mean quality, from
    the cheapest up."""
    front: list[Point] = []
    best = math.inf
    for p in sorted((p for p in pts if p.eligible), key=lambda p: (p.cost, p.group)):
        score = p.quality if lower else -p.quality
        if score < best:
            front.append(p)
            best = score
    return front


def _axes(
    cells: pd.DataFrame, regression: bool, fidelity: bool, regions: dict[str, str]
) -> list[Axis]:
    """Fidelity (where ``fidelity``, the dataset's references have a floor, and cells have it) and
    test LL, the latter on each part of a test set that has parts."""
    axes = []
    if fidelity:
        column = "ref_w2" if regression else "ref_tv"
        if column in cells and cells[column].notna().any():
            axes.append(Axis(column, label(column), lower=True))
    if regions:
        axes += [
            Axis(f"test_ll_{part}", f"test LL {name}", False) for part, name in regions.items()
        ]
    else:
        axes.append(Axis("test_ll", "test LL" if regression else "test LL (-NLL)", False))
    return axes


def _reference_sentence(entries: Sequence[ReferenceEntry]) -> list[Inline]:
    """The dataset's reference posterior: its chain ensemble and its floor; where a reference
    has none, that fidelity is not ranked, why, on what the dataset is ranked instead and what
    to try; a reference that failed or timed out, with its cause and remedy."""
    if not entries:
        return [
            f"No reference posterior: the suite computes none, so fidelity is not shown; "
            f"{TEST_ONLY}."
        ]
    usable = [e for e in entries if e.usable]
    failure = reference_failure(entries)
    retry = f"{fmt.capital(REFERENCE_RETRY)}."
    if not usable and failure is not None:
        return [f"{fmt.capital(failure)}, so fidelity is not shown; {TEST_ONLY}. {retry}"]
    if not usable:
        notes = "; ".join(sorted({e.note or e.status for e in entries}))
        return [f"No reference posterior ({notes}), so fidelity is not shown; {TEST_ONLY}."]
    failed: list[Inline] = [f" {fmt.capital(failure)}. {retry}"] if failure is not None else []
    if references_pass(entries):
        return [Strong("Reference posterior:"), f" {ensemble_description(usable)}", *failed]
    bad = [e for e in usable if not e.passed]
    return [
        Strong(f"{NOT_RANKED.capitalize()}"),
        f" ({no_floor_detail(bad, usable)}); ranked on held-out test log-likelihood instead, "
        "and the front is drawn on it and cost; the distances to the reference are listed "
        "apart under ",
        Link("Against the reference posterior", f"#{slug('reference', bad[0].dataset)}"),
        f". Try {floor_remedy(bad)}.",
        *failed,
    ]


def _flags(group: pd.DataFrame, standing: Standing) -> str:
    """What a reader should know of a contestant beyond its numbers: why it is avoided or not
    judged, sampler chains that disagree, cells that failed."""
    flags = [standing.why] if standing.reason else []
    if convergence_flag(group):
        flags.append(convergence_flag(group))
    for status, words in STATUS_WORDS.items():
        hits = int((group["status"] == status).sum())
        if hits and words != standing.reason:
            flags.append(f"{words} in {hits} of {len(group)} cells")
    if reduced(group).any() and standing.reason != "reduced budget":
        flags.append(f"reduced budget {BUDGET_MARK}")
    return "; ".join(flags)


def _basis_order(used: pd.DataFrame, rec: Recommendation) -> Callable[[Standing], tuple]:
    """Ranked contestants first, then those to avoid, then those not judged; by the basis
    within each."""
    ranked = (Grade.TRUST, Grade.AS_GOOD, Grade.UNDECIDED, Grade.WORSE)

    def key(standing: Standing) -> tuple:
        block = 0 if standing.grade in ranked else 1 + (standing.grade == Grade.NOT_JUDGED)
        value = math.inf
        if rec.basis is not None and rec.basis.column in used:
            mine = _of(used, standing.group)
            mean = mean_se(mine[rec.basis.column])[0]
            if np.isfinite(mean):
                value = mean if rec.basis.lower else -mean
        return (block, value, method_key(standing.group[0]), backend_key(standing.group[1]))

    return key


def _of(cells: pd.DataFrame, group: Group) -> pd.DataFrame:
    return cells[(cells["method"] == group[0]) & (cells["backend"] == group[1])]


def evidence_table(cells: pd.DataFrame, rec: Recommendation, fidelity: bool) -> Table | None:
    """Every contestant of one dataset: its standing, fidelity (where ``fidelity``, the
    dataset's references have a floor; with its mean ratio to the floor, "k\u00d7 the floor" or
    "indistinguishable from the reference"), test LL, calibration, out-of-range std (against the
    reference's where ``fidelity``) and cost (mean ± se over its cells with metrics), and
    flags."""
    if not rec.standings:
        return None
    regression = "rmse" in cells and cells["rmse"].notna().any()
    candidates = ["ref_w2" if regression else "ref_tv"] if fidelity else []
    candidates += ["test_ll", "coverage_95" if regression else "ece"]
    against = fidelity and "ref_std_ratio_out" in cells
    candidates += ["ref_std_ratio_out" if against else "epistemic_std_ratio"]
    columns = [c for c in candidates if c in cells and cells[c].notna().any()]
    used = cells[cells["status"].isin(WITH_METRICS)]
    rows = []
    for standing in sorted(rec.standings, key=_basis_order(used, rec)):
        mine = _of(used, standing.group)
        numbers = [_with_floor(mine, c) for c in columns]
        grade = str(standing.grade)
        rows.append(
            (
                Strong(grade) if standing.grade == Grade.TRUST else grade,
                *standing.group,
                *numbers,
                fmt.mean_se(*mean_se(mine[COST])),
                _flags(_of(cells, standing.group), standing),
            )
        )
    basis = "" if rec.basis is None else f", the ranked ones first by {rec.basis.name.rstrip('.')}"
    headers = {"ref_std_ratio_out": "std / ref. std out of range"}
    return Table(
        (
            "standing",
            "method",
            "backend",
            *(headers.get(c) or label(c) for c in columns),
            "cost s",
            "flags",
        ),
        tuple(rows),
        f"{rec.dataset}: every contestant, mean \u00b1 standard error over splits and seeds"
        f"{basis}. Cost: fit and tuning seconds without compilation.",
        (),
        (False, False, False, *(True,) * (len(columns) + 1), False),
    )


def _with_floor(cells: pd.DataFrame, column: str) -> str:
    """``column``'s mean ± se over ``cells``; for the distance a floor is measured in, with the
    mean ratio to the floor: ``"0.041 ± 0.003 (2.4\u00d7 the floor)"``."""
    text = fmt.mean_se(*mean_se(cells[column]))
    if column in FLOOR_DISTANCES and FLOOR_RATIO in cells and text:
        floor = fmt.against_floor(mean_se(cells[FLOOR_RATIO])[0])
        text += f" ({floor})" if floor else ""
    return text


def front_figure(dataset: str, panels: list[tuple[Axis, list[Point], list[Point]]]) -> Figure:
    """Quality against cost per axis: every point with error bars, the front joined."""
    fig = MplFigure(figsize=(4.6 * len(panels) + 1.2, 3.9), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    methods, backends = set(), set()
    for ax, (axis, pts, front) in zip(axes, panels, strict=True):
        for p in pts:
            methods.add(p.group[0])
            backends.add(p.group[1])
            color = method_color(p.group[0])
            if np.isfinite(p.compile_s) and p.compile_s > 0:
                ax.plot([p.cost, p.cost + p.compile_s], [p.quality] * 2, color=color, lw=0.6,
                        ls=":", alpha=0.7)  # fmt: skip
            ax.errorbar(
                p.cost,
                p.quality,
                xerr=np.nan_to_num(p.cost_se),
                yerr=np.nan_to_num(p.quality_se),
                color=color,
                marker=backend_marker(p.group[1]),
                mfc=color if p.eligible else "white",
                ms=7,
                lw=1,
                capsize=2,
            )
        if front:
            ax.plot([p.cost for p in front], [p.quality for p in front], color="0.25", lw=1.2,
                    ls="--", zorder=0)  # fmt: skip
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        plain_log_ticks(ax.xaxis)
        better = "lower is better" if axis.lower else "higher is better"
        ax.set(
            xlabel="fit (and tuning) seconds without compilation (log)",
            ylabel=f"{axis.name} ({better})",
        )
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    legend_methods_backends(fig, sorted(methods, key=method_key), sorted(backends, key=backend_key))
    names = "; ".join(axis.name for axis, _, _ in panels)
    caption = (
        f"Quality against cost (panels: {names}), mean ± standard error over splits and seeds "
        "per method (colour) and backend (marker). Dashed line: the Pareto front (no other "
        "pair is both cheaper and better on average). Hollow markers: not ranked (a cell failed "
        "or diverged, or a reduced budget); unusable fits are left out. A tuned contestant's "
        "cost includes its tuning fits. Dotted tails: compilation time, which a new process "
        "pays again unless its compilation cache holds the program."
    )
    return figure_of(dataset, "summary-front", fig, caption)


def no_result(cells: pd.DataFrame, dataset: str) -> Paragraph | None:
    """Where no cell of ``dataset`` produced a result (every one failed or timed out): that,
    and how each contestant's cells ended, with their error types; else None."""
    if cells.empty or cells["status"].isin(WITH_METRICS).any():
        return None
    parts = []
    for (method, backend), group in cells.groupby(["method", "backend"], sort=False):
        for status, ended in group.groupby("status", sort=False):
            types = ", ".join(sorted(set(ended["error_type"].dropna().astype(str))))
            parts.append(
                f"{method}/{backend}: {len(ended)} of {len(group)} cells "
                f"{STATUS_WORDS.get(str(status), status)}" + (f" ({types})" if types else "")
            )
    return Paragraph.of(
        Strong("No cell produced a result"),
        f", so nothing is ranked: {'; '.join(parts)}. Their errors are listed under ",
        Link("Failed, timed-out and diverged cells", f"#{slug(dataset, 'problems')}"),
        ".",
    )


def dataset_summary(results: SuiteResults, dataset: str, rec: Recommendation) -> Section:
    """The Summary subsection of one dataset: its reference, its recommendation, the evidence
    table and the quality-cost figure."""
    cells = with_cost(results.cells[results.cells["dataset"] == dataset])
    regression = "rmse" in cells and cells["rmse"].notna().any()
    entries = results.references_of(dataset)
    fidelity = references_pass(entries)
    axes = _axes(cells, regression, fidelity, results.regions(dataset))
    section = Section(dataset, slug("summary", dataset))
    section.blocks.append(Paragraph(tuple(_reference_sentence(entries))))
    if (nothing := no_result(cells, dataset)) is not None:
        section.blocks.append(nothing)
    section.blocks.append(Paragraph.of(Strong("Recommendation: "), rec.sentence()))
    table = evidence_table(cells, rec, fidelity)
    if table is not None:
        section.blocks.append(table)
    panels = []
    for axis in axes:
        pts = points(cells, axis.column)
        if pts:
            panels.append((axis, pts, pareto_front(pts, axis.lower)))
    if panels:
        section.blocks.append(front_figure(dataset, panels))
    return section


def set_aside_note(results: SuiteResults) -> Paragraph | None:
    """The Summary's line naming the earlier results set aside, not overwritten, because
    another took their place (a cell refitted on other data), and where they are."""
    if not results.replaced:
        return None
    by_kind: dict[str, list[str]] = {}
    for note in results.replaced:
        by_kind.setdefault(str(note.get("kind")), []).append(
            f"{note.get('name')} ({note.get('reason')}; kept in {note.get('folder')})"
        )
    parts = [f"{len(names)} {kind}: {'; '.join(names)}" for kind, names in by_kind.items()]
    return Paragraph.of(
        Strong("Set aside, not overwritten: "),
        f"earlier results another run took the place of. {'. '.join(parts)}. They are not in "
        "this report.",
    )


def _margin_words(margins: Margins) -> str:
    """The margins in words, for the Summary's rule."""
    return (
        f"on fidelity, distances within {fmt.number(margins.fidelity_ratio)}\u00d7 of each "
        "other, or one floor apart where that is more; on test log-likelihood, "
        f"{fmt.number(margins.test_ll_nats)} nats per point"
    )


def summary_section(results: SuiteResults, recs: dict[str, Recommendation]) -> Section:
    """ "Summary": the rule behind the recommendations, then one subsection per dataset."""
    section = Section("Summary", "summary")
    margins = margins_of(results)
    section.blocks.append(
        Paragraph.of(
            "Which approximation to trust for its cost, per dataset, generated from the stored "
            "results. The rule: rank on fidelity to the reference posterior where every "
            "reference of the dataset that could be computed has a floor (the distance between "
            "two halves of its chains, measured as the contestants' distance is), otherwise on "
            "held-out test log-likelihood. Each distance is shown beside the floor "
            f'("k\u00d7 the floor"); a distance within the floor is "{fmt.INDISTINGUISHABLE}". '
            "Fidelity to a reference without a floor ranks nothing and is not drawn on the "
            "front. Avoid a contestant with a cell worse than a constant predictor or that "
            f"diverged, or whose predictive std out of range is below {OVERCONFIDENT:g} of the "
            "reference's (one with a floor). Not judged: a failed or timed-out cell, or a "
            "reduced budget. Among the rest, trust the best mean (on fidelity, the geometric "
            "mean of the distances). Each other contestant is compared with it over the splits "
            "and seeds both ran, by two one-sided tests at the 5% level: as good where shown "
            f"equivalent within the margin ({_margin_words(margins)}), worse where shown worse "
            "by more than the margin, and otherwise undecided: its n replicates "
            "cannot tell, and more seeds would. The cheapest contestant shown as good is named, "
            "and, on fidelity, the cheapest shown as good as the reference (its distance within "
            f"{fmt.number(margins.fidelity_ratio)}\u00d7 the floor). Costs are fit and tuning "
            "seconds without compilation, with it beside."
        )
    )
    for note in (summary_note(results), set_aside_note(results)):
        if note is not None:
            section.blocks.append(note)
    section.children = [dataset_summary(results, d, recs[d]) for d in results.datasets()]
    return section
