"""The report's first section: which approximation to trust on each dataset, for what cost.

Everything here is generated from the stored results. Per dataset it gives the reference
posterior's verdict, the Pareto front of quality against cost (a figure with error bars and the
front named in words), the winner of each headline metric or the tie, and the notable failures:
unusable fits, over-confidence where no training input lies, divergences, chains that did not
converge, failures and timeouts. Only eligible (method, backend) pairs enter the front and the
ranking (every cell ok, unflagged, full budget; see :mod:`.ranking`).

Cost is the fit's wall time without compilation (``total - compile``): compiling once is JAX's
and torch's price, paid again only in a new process with no compilation cache; it is drawn apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import LogLocator

from ppl_bnn.report import fmt
from ppl_bnn.report.document import BulletList, Figure, Inline, Paragraph, Section, Strong, slug
from ppl_bnn.report.figures import figure_of, legend_methods_backends, plain_log_ticks
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import ReferenceEntry, SuiteResults, backend_key, method_key
from ppl_bnn.report.ranking import Group, Ranking, eligible_groups, flagged, rank, reduced
from ppl_bnn.report.recommend import COST, OVERCONFIDENT, mean_se, with_cost
from ppl_bnn.report.stats import WITH_METRICS
from ppl_bnn.report.style import backend_marker, method_color
from ppl_bnn.report.sweeps import summary_note

#: A sampler's chains count as converged when the largest R-hat of its test predictions is at
#: most this (the reference posterior's gate; Vehtari et al. 2021).
RHAT_OK = 1.01


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


def _name(group: Group) -> str:
    return f"{group[0]}/{group[1]}"


def _axes(
    cells: pd.DataFrame, regression: bool, reference_usable: bool, regions: dict[str, str]
) -> list[Axis]:
    """Fidelity (where a reference has numbers) and test LL, the latter on each part of a test
    set that has parts."""
    axes = []
    if reference_usable:
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
    if not entries:
        return ["No reference posterior: the suite computes none, so fidelity is not shown."]
    usable = [e for e in entries if e.usable]
    if not usable:
        notes = "; ".join(sorted({e.note or e.status for e in entries}))
        return [f"No reference posterior ({notes}), so fidelity is not shown."]
    parts: list[Inline] = []
    for e in usable:
        s = e.settings
        what = (
            f"split {e.split}: NumPyro NUTS, {s.get('num_chains')} chains \u00d7 "
            f"({s.get('num_warmup')} + {s.get('num_samples')}) draws, "
        )
        diag = e.diagnostics
        numbers = (
            f"R\u0302 max {fmt.number(diag.get('rhat_max'), 4)}, bulk ESS min "
            f"{fmt.number(diag.get('ess_bulk_min'))}"
        )
        if e.converged:
            parts += [what, Strong("converged"), f" ({numbers}). "]
        else:
            parts += [
                what,
                Strong("not converged"),
                f" ({numbers}; gate R\u0302 \u2264 {e.gate.get('rhat_max')}, ESS \u2265 "
                f"{e.gate.get('ess_bulk_min')}): its fidelity numbers are indicative only. ",
            ]
    return ["Reference posterior: ", *parts]


def _front_sentence(front: list[Point], axis: Axis) -> list[Inline]:
    if not front:
        return []
    steps = ", then ".join(
        f"{_name(p.group)} ({fmt.number(p.cost)} s, {fmt.mean_se(p.quality, p.quality_se)})"
        for p in front
    )
    return [Strong(f"Pareto front of {axis.name} against cost: "), steps, "."]


def _verdict_sentence(verdict: Ranking | None, axis: Axis) -> list[Inline]:
    if verdict is None:
        return []
    if verdict.best is not None:
        return [
            f"Best {axis.name}: ",
            Strong(_name(verdict.best)),
            f", ahead of {_name(verdict.runner_up)} by {fmt.number(verdict.lead)} ± "
            f"{fmt.number(verdict.lead_se)} (paired over {verdict.pairs} replicates).",
        ]
    tied = ", ".join(sorted(_name(g) for g in verdict.tied))
    if verdict.pairs < 2:
        return [f"No clear best {axis.name} among {tied}: fewer than two paired replicates."]
    return [
        f"No clear best {axis.name}: a paired t-test at the 5% level does not tell apart {tied}."
    ]


def _counted(cells: pd.DataFrame, mask: pd.Series) -> dict[Group, tuple[int, int]]:
    """(method, backend) -> (cells where ``mask`` holds, cells) for groups with any."""
    out = {}
    for (method, backend), group in cells.groupby(["method", "backend"], sort=False):
        hits = int(mask.loc[group.index].sum())
        if hits:
            out[(str(method), str(backend))] = (hits, len(group))
    return out


def _list(counts: dict[Group, tuple[int, int]], extra: dict[Group, str] | None = None) -> str:
    items = sorted(counts, key=lambda g: (method_key(g[0]), backend_key(g[1])))
    return ", ".join(
        f"{_name(g)} ({counts[g][0]} of {counts[g][1]} cells"
        + (f"; {extra[g]}" if extra and g in extra else "")
        + ")"
        for g in items
    )


#: The start of each usability flag (:func:`ppl_bnn.metrics.usability_flags`) and its short name.
_FLAG_KINDS = (
    ("test log-likelihood", "test LL"),
    ("training log-likelihood", "training LL"),
    ("log-likelihood not finite", "non-finite LL"),
)


def _flag_kinds(flags: pd.Series) -> str:
    """Which checks a group's flagged cells failed, e.g. ``"test LL, training LL below the
    constant's"``, or ``"test LL in range below the constant's"`` where the test check scored
    one part of the test set."""
    text = "; ".join(flags.dropna().astype(str))
    kinds = [short for start, short in _FLAG_KINDS if start in text]
    test_parts = sorted(set(re.findall(r"test log-likelihood \(([^)]+)\)", text)))
    if test_parts:
        kinds = [f"test LL {' / '.join(test_parts)}" if k == "test LL" else k for k in kinds]
    below = [k for k in kinds if k != "non-finite LL"]
    parts = [f"{', '.join(below)} below the constant's"] if below else []
    return "; ".join(parts + [k for k in kinds if k == "non-finite LL"])


def failure_sentences(cells: pd.DataFrame, regions: dict[str, str]) -> list[tuple[Inline, ...]]:
    """The notable failures of one dataset's cells, one bullet each."""
    bullets: list[tuple[Inline, ...]] = []
    bad = flagged(cells)
    if bad.any():
        reasons = {
            (str(m), str(b)): _flag_kinds(group["flags"])
            for (m, b), group in cells[bad].groupby(["method", "backend"], sort=False)
        }
        bullets.append(
            (
                Strong("Unusable"),
                " (worse than a constant predictor), left out of the front and the ranking: ",
                _list(_counted(cells, bad), reasons) + ".",
            )
        )
    if "ref_std_ratio_out" in cells and regions.get("out"):
        ratio = cells.groupby(["method", "backend"], sort=False)["ref_std_ratio_out"].mean()
        low = {(str(m), str(b)): r for (m, b), r in ratio.items() if r < OVERCONFIDENT}
        if low:
            text = ", ".join(
                f"{_name(g)} (std {fmt.number(r)}\u00d7 the reference's)"
                for g, r in sorted(low.items(), key=lambda kv: kv[1])
            )
            bullets.append((Strong(f"Over-confident {regions['out']}"), ": ", text + "."))
    for status, title in (("diverged", "Diverged"), ("failed", "Failed"), ("timeout", "Timed out")):
        counts = _counted(cells, cells["status"] == status)
        if counts:
            bullets.append((Strong(title), ": ", _list(counts) + "."))
    if "rhat_max" in cells:
        rhat = cells["rhat_max"].astype(float)
        counts = _counted(cells, rhat > RHAT_OK)
        if counts:
            largest = rhat.groupby([cells["method"], cells["backend"]]).max()
            worst = {g: f"R\u0302 up to {fmt.number(largest[g], 3)}" for g in counts}
            bullets.append(
                (
                    Strong("Chains not converged"),
                    f" (largest R\u0302 of test predictions above {RHAT_OK}): ",
                    _list(counts, worst) + ".",
                )
            )
    counts = _counted(cells, reduced(cells))
    if counts:
        bullets.append(
            (Strong("Reduced budget"), ", marked \u2020 and never ranked: ", _list(counts) + ".")
        )
    return bullets


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
    caption = (
        "Quality against cost, mean ± standard error over splits and seeds per method (colour) "
        "and backend (marker). Dashed line: the Pareto front (no other pair is both cheaper and "
        "better on average). Hollow markers: not ranked (a cell failed or diverged, or a reduced "
        "budget); unusable fits are left out. A tuned contestant's cost includes its tuning "
        "fits. Dotted tails: compilation time, which a new process pays again unless its "
        "compilation cache holds the program."
    )
    return figure_of(dataset, "summary-front", fig, caption)


def dataset_summary(results: SuiteResults, dataset: str) -> Section:
    """The Summary subsection of one dataset."""
    cells = with_cost(results.cells[results.cells["dataset"] == dataset])
    regression = "rmse" in cells and cells["rmse"].notna().any()
    entries = [e for (d, _), e in sorted(results.references.items()) if d == dataset]
    regions = results.regions(dataset)
    axes = _axes(cells, regression, any(e.usable for e in entries), regions)
    section = Section(dataset, slug("summary", dataset))
    section.blocks.append(Paragraph(tuple(_reference_sentence(entries))))
    bullets: list[tuple[Inline, ...]] = []
    panels = []
    eligible = eligible_groups(cells)
    for axis in axes:
        pts = points(cells, axis.column)
        if not pts:
            continue
        front = pareto_front(pts, axis.lower)
        panels.append((axis, pts, front))
        if front:
            bullets.append(tuple(_front_sentence(front, axis)))
        verdict = _verdict_sentence(rank(cells, axis.column, eligible), axis)
        if verdict:
            bullets.append(tuple(verdict))
    bullets += failure_sentences(cells, regions)
    if bullets:
        section.blocks.append(BulletList(tuple(bullets)))
    if panels:
        section.blocks.append(front_figure(dataset, panels))
    return section


def summary_section(results: SuiteResults) -> Section:
    """ "Summary": the answer first, one subsection per dataset."""
    section = Section("Summary", "summary")
    section.blocks.append(
        Paragraph.of(
            "Which approximation to trust for its cost, per dataset, generated from the stored "
            "results: the reference posterior's convergence, the Pareto front of fidelity to "
            "that reference and of test log-likelihood against fit time, the best method where "
            "a paired t-test over splits and seeds at the 5% level says its lead is more than "
            "noise (otherwise the tie), and what went wrong."
        )
    )
    note = summary_note(results)
    if note is not None:
        section.blocks.append(note)
    section.children = [dataset_summary(results, d) for d in results.datasets()]
    return section
