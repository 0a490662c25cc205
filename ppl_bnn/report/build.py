"""Assemble the report document from stored results: which sections exist and what they hold.

A section is left out when the suite has no data for it. A table or figure that cannot be built
from malformed results is logged and replaced by a one-line note, never a crash.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import pandas as pd

from ppl_bnn.bench.cell import base_method
from ppl_bnn.methods import method_names
from ppl_bnn.report import (
    figures,
    pruning,
    published_uci,
    refusal,
    stats,
    sweeps,
    tables,
    tuning,
)
from ppl_bnn.report.answer import answer_blocks, recommendations, verdict
from ppl_bnn.report.backends import backend_tables
from ppl_bnn.report.background import Background
from ppl_bnn.report.document import (
    BulletList,
    Document,
    Figure,
    Link,
    Paragraph,
    Section,
    Strong,
    Table,
    slug,
)
from ppl_bnn.report.fidelity import COLUMNS as FIDELITY_COLUMNS
from ppl_bnn.report.fidelity import with_fidelity
from ppl_bnn.report.figure_memo import FigureMemo
from ppl_bnn.report.glossary import CONCEPTS, IZMAILOV_2021, QUANTITIES, Citation
from ppl_bnn.report.load import SuiteResults, method_key
from ppl_bnn.report.published import published_classification_table
from ppl_bnn.report.reference_tables import reference_info_table
from ppl_bnn.report.summary import summary_section

logger = logging.getLogger(__name__)

#: Sampler cells that get rank plots and weight summaries (rendering cost stays bounded).
MAX_RANK_CELLS = 4
RANK_METHODS = method_names(exact=True)
IZMAILOV = Link(IZMAILOV_2021.short, str(IZMAILOV_2021.url))

T = TypeVar("T")


class _Builder:
    """Collects failures of individual tables and figures while building."""

    def __init__(self, results: SuiteResults) -> None:
        self.results = results
        self.failures: list[str] = []
        self.loo: Background | None = None
        self.with_loo = True
        self.figures = FigureMemo(results)

    def safe(self, what: str, fn: Callable[..., T], *args: Any) -> T | None:
        """``fn(*args)``, or None (logged and listed in the report) if it raises."""
        start = time.perf_counter()
        try:
            return fn(*args)
        except Exception as err:  # a malformed file must not sink the whole report
            logger.exception("report: %s failed", what)
            self.failures.append(f"{what}: {type(err).__name__}: {err}")
            return None
        finally:
            logger.debug("report: %s took %.2fs", what, time.perf_counter() - start)


def build_document(results: SuiteResults, *, loo: bool = True) -> Document:
    """The whole report for ``results``: the Summary first, then the evidence. ``loo=False``
    leaves the PSIS-LOO comparison for a later render (the live report of a running sweep:
    :mod:`ppl_bnn.report.live`), saying so where it would be."""
    b = _Builder(results)
    b.with_loo = loo
    if loo:  # started first, it runs on another core while the rest is built
        b.loo = Background("loo_compare", results, lambda: stats.loo_compare(results))
    b.safe("fidelity to the reference posteriors", with_fidelity, results)
    recs = b.safe("recommendations", recommendations, results) or {}
    summary = b.safe("summary", summary_section, results, recs)
    if summary is not None:
        published = [
            table
            for column in ("test_ll", "rmse")
            if (table := b.safe(f"published {column}", published_uci.overview, results, column))
        ]
        if published:
            summary.children.append(
                Section("Beside the published figures", "summary-published", published)
            )
    sections = [
        summary,
        overview(b),
        how_to_read(results),
    ]
    sections += [dataset_section(b, d) for d in results.datasets()]
    sections += [
        studies_section(b),
        mcmc_section(b),
        loo_section(b),
        backends_section(b),
        reference_section(b),
        environment_section(results),
    ]
    if b.failures:
        sections.insert(
            2,
            Section(
                "Parts that could not be built",
                "build-failures",
                [BulletList(tuple((f,) for f in b.failures))],
            ),
        )
    kept = [s for s in sections if s is not None and not s.is_empty()]
    _unique_names(kept, set(), set())
    b.figures.save()
    subtitle = str(results.suite.get("description") or "")
    problems = tuple((problem,) for problem in results.problems)
    title = f"Benchmark report: {results.name}"
    return Document(
        title,
        subtitle,
        kept,
        problems,
        progress=results.progress,
        answer=answer_blocks(recs),
        verdict=verdict(recs),
    )


def _unique_names(sections: list[Section], anchors: set[str], figures: set[str]) -> None:
    """Suffix anchors and figure names that repeat (datasets whose names differ only in case or
    symbols slug to the same text)."""

    def fresh(name: str, seen: set[str]) -> str:
        out, k = name, 2
        while out in seen:
            out, k = f"{name}-{k}", k + 1
        seen.add(out)
        return out

    for section in sections:
        section.anchor = fresh(section.anchor, anchors)
        for i, block in enumerate(section.blocks):
            if isinstance(block, Figure):
                name = fresh(block.name, figures)
                if name != block.name:
                    section.blocks[i] = replace(block, name=name)
        _unique_names(section.children, anchors, figures)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def overview(b: _Builder) -> Section:
    """Counts of cells by status, the reference, and every reduced budget."""
    results = b.results
    cells = results.cells
    section = Section("Overview", "overview")
    study = _study_note(results)
    if cells.empty:
        held = "no cell records yet" if study is None else "no contestant's cells"
        section.blocks.append(Paragraph.of(f"This results folder holds {held}."))
        _add(section.blocks, study)
        return section
    status = cells["status"].value_counts()
    methods = sorted(cells["method"].unique(), key=method_key)
    text = (
        f"{_count(len(cells), 'cell')} ({', '.join(f'{n} {s}' for s, n in status.items())}) over "
        f"{_count(len(results.datasets()), 'dataset')}, {_count(len(methods), 'method')} and "
        f"backends {', '.join(sorted(cells['backend'].unique()))}{timing_sentence(results)}. "
        "Every number below is computed from the stored records and netCDF files."
    )
    section.blocks.append(Paragraph.of(text))
    _add(section.blocks, study)
    # A study's dataset has no reference by design: only the contestants' count.
    references = [e for (d, _), e in results.references.items() if d in results.datasets()]
    if references:
        passed = sum(bool(e.passed) for e in references)
        section.blocks.append(
            Paragraph.of(
                f"Reference posteriors: {passed} of {len(references)} (dataset, "
                "split) pairs have one with a floor (see ",
                Link("Against the reference posterior", "#reference"),
                ").",
            )
        )
    counts = (
        cells.pivot_table(index="dataset", columns="status", values="cell_id", aggfunc="count")
        .fillna(0)
        .astype(int)
        .reindex(results.datasets())
    )
    header = ("dataset", "task", *counts.columns)
    rows = tuple(
        (d, tables.task_of(results, d) or "", *(str(v) for v in counts.loc[d]))
        for d in counts.index
    )
    section.blocks.append(
        Table(
            header,
            rows,
            "Cells per dataset and status.",
            (),
            (False, False, *(True,) * len(counts.columns)),
        )
    )
    budget = b.safe("budget table", tables.budget_table, results)
    if budget is not None:
        section.children.append(Section("Reduced budgets", "budgets", [budget]))
    return section


def timing_sentence(results: SuiteResults) -> str:
    """``"; their own wall times sum to 30.7 minutes, and they come from 2 runs: 21.0 minutes
    (250 cells), 0.4 minutes (2 cells, interrupted)"``: the cells' total time and the wall time
    of every run (``suite.json``'s ``runs``) that produced one of them, matched by when each
    cell started."""
    cells = results.cells
    parts = []
    if "time_cell_wall" in cells:
        total = float(cells["time_cell_wall"].astype(float).sum(min_count=1))
        if math.isfinite(total):
            parts.append(f"their own wall times sum to {total / 60:.1f} minutes")
    started = pd.to_datetime(
        cells["started_at"] if "started_at" in cells else pd.Series(None, index=cells.index),
        utc=True,
        errors="coerce",
    )
    runs, counted = [], 0
    for run in results.suite.get("runs") or []:
        try:
            window = pd.to_datetime([run["started_at"], run["finished_at"]], utc=True)
            minutes = float(run["wall_s"]) / 60
        except (KeyError, TypeError, ValueError):
            continue
        produced = int(((started >= window[0]) & (started <= window[1])).sum())
        if produced:
            counted += produced
            note = ", interrupted" if run.get("interrupted") else ""
            runs.append(f"{minutes:.1f} minutes ({_count(produced, 'cell')}{note})")
    if runs:
        what = "1 run" if len(runs) == 1 else f"{len(runs)} runs"
        earlier = len(cells) - counted
        rest = f", and {earlier} from runs before they were recorded" if earlier else ""
        parts.append(f"they come from {what}: {', '.join(runs)}{rest}")
    return "".join(f"; {p}" for p in parts)


def _study_note(results: SuiteResults) -> Paragraph | None:
    """The overview's line on the study cells, which it does not count with the others."""
    if results.sweeps.empty:
        return None
    return Paragraph.of(
        f"Besides, {_count(len(results.sweeps), 'study cell')} (one method over one option's "
        "values, not counted with the others): see ",
        Link("Studies", f"#{sweeps.ANCHOR}"),
        ".",
    )


def how_to_read(results: SuiteResults) -> Section:
    """How the tables are computed and one line per metric shown."""
    present = set(results.metric_names) | {f"time_{t}" for t in results.timing_names}
    present |= {
        c for c in FIDELITY_COLUMNS if c in results.cells and results.cells[c].notna().any()
    }
    items = tuple(
        (Strong(q.label), f" ({key}): {q.definition}.")
        for key, q in QUANTITIES.items()
        if key in present
    )
    intro = Paragraph.of(
        "Each cell is one fit of one (dataset, split, method, backend, seed). Tables give the "
        "mean ± standard error (sample std / sqrt(n)) over the splits and seeds that produced "
        "metrics; n is that count, and the standard error is blank when n = 1. Regression "
        "metrics are in the target's original units. A dagger (",
        tables.BUDGET_MARK,
        ") marks a (method, backend) run with a reduced budget, explained under its table. "
        "Sampler convergence is judged on predictions, not weights (",
        IZMAILOV,
        "). Metric definitions:",
    )
    blocks: list[Any] = [intro]
    if items:
        blocks.append(BulletList(items))
    if results.references:
        blocks.append(Paragraph.of("The reference posterior:"))
        blocks.append(
            BulletList(
                tuple(
                    (Strong(c.label), f": {c.definition} (", *_cited(c.citations), ").")
                    for c in CONCEPTS.values()
                )
            )
        )
    return Section("How to read this report", "how-to-read", blocks)


def _cited(citations: tuple[Citation, ...]) -> list[Any]:
    """Sources as inline parts: each short name (a link where it has an address) and title,
    separated by semicolons."""
    parts: list[Any] = []
    for citation in citations:
        if parts:
            parts.append("; ")
        short = citation.short if citation.url is None else Link(citation.short, citation.url)
        parts += [short, f", {citation.title}"]
    return parts


def dataset_section(b: _Builder, dataset: str) -> Section:
    """A dataset's tables (quality, problems, published figures, cost) and figures."""
    results = b.results
    task = tables.task_of(results, dataset)
    title = f"{dataset}" + (f" ({task})" if task else "")
    section = Section(title, slug("dataset", dataset))
    blocks = section.blocks
    _add(blocks, b.safe(f"{dataset} table", tables.dataset_table, results, dataset))
    _add(blocks, b.safe(f"{dataset} budget notes", tables.budget_notes, results, dataset))
    _add(blocks, b.safe(f"{dataset} tuning", tuning.tuning_notes, results, dataset))
    problem = b.safe(f"{dataset} problems", tables.problems, results, dataset)
    if problem is not None and problem[0] is not None:
        table, details = problem
        section.children.append(
            Section(
                "Failed, timed-out and diverged cells", slug(dataset, "problems"), [table, *details]
            )
        )
    published = b.safe(f"{dataset} published figures", published_uci.per_dataset, results, dataset)
    if published is None:
        published = b.safe(
            f"{dataset} published figures", published_classification_table, results, dataset
        )
    if published is not None:
        section.children.append(
            Section("Published reference figures", slug(dataset, "published"), [published])
        )
    refusing = Section("Refusing to classify", slug(dataset, "refusal"))
    _add(refusing.blocks, b.safe(f"{dataset} refusals", refusal.refusal_table, results, dataset))
    _add(
        refusing.blocks,
        b.safe(
            f"{dataset} selective classification",
            b.figures.draw,
            refusal.selective_figure,
            dataset,
        ),
    )
    if refusing.blocks:
        section.children.append(refusing)
    figs = Section("Figures", slug(dataset, "figures"))
    for draw in figures.DATASET_FIGURES:
        figure = b.safe(f"{dataset} figure {draw.__name__}", b.figures.draw, draw, dataset)
        _add(figs.blocks, figure)
        if draw is figures.training_curves:
            split = b.safe(f"{dataset} ELBO split", tables.training_table, results, dataset)
            _add(figs.blocks, split)
        if draw is figures.pruning:
            _add(figs.blocks, b.safe(f"{dataset} pruning", pruning.pruning_table, results, dataset))
    section.children.append(figs)
    cost = b.safe(f"{dataset} cost table", tables.cost_table, results, dataset)
    if cost is not None:
        section.children.append(Section("Time and cost", slug(dataset, "cost"), [cost]))
    section.children = [c for c in section.children if not c.is_empty()]
    return section


def studies_section(b: _Builder) -> Section | None:
    """Each study (a suite's ``sweep``) apart from the contestants: what it fits, its figure
    and its table."""
    results = b.results
    found = b.safe("studies", sweeps.studies, results) or []
    if not found:
        return None
    section = Section("Studies", sweeps.ANCHOR, [Paragraph.of(sweeps.INTRO)])
    for study in found:
        blocks: list[Any] = []
        _add(blocks, b.safe(f"{study.title}: description", sweeps.describe, study))
        _add(blocks, b.safe(f"{study.title}: figure", sweeps.sweep_figure, results, study))
        _add(blocks, b.safe(f"{study.title}: table", sweeps.sweep_table, results, study))
        section.children.append(Section(study.title, study.anchor, blocks))
    return section


def _add(blocks: list, block: Any) -> None:
    if block is not None:
        blocks.append(block)


def _rank_cells(results: SuiteResults) -> list[str]:
    """A few sampler cells for rank plots: the first ok cell of each (method, backend) over the
    datasets, preferring cells with several chains, at most :data:`MAX_RANK_CELLS`."""
    cells = results.cells
    chosen: list[str] = []
    seen: set[tuple[str, str]] = set()
    for dataset in results.datasets():
        sub = cells[
            (cells["dataset"] == dataset)
            & cells["method"].map(base_method).isin(RANK_METHODS)
            & (cells["status"] == "ok")
        ]
        for (method, backend), group in sub.groupby(["method", "backend"], sort=False):
            if (method, backend) in seen or len(chosen) >= MAX_RANK_CELLS:
                continue
            seen.add((method, backend))
            chains = group.get("options.num_chains", pd.Series(1, index=group.index))
            order = group.assign(_chains=-pd.to_numeric(chains, errors="coerce").fillna(1))
            chosen.append(order.sort_values(["_chains", "split", "seed"]).iloc[0]["cell_id"])
    return chosen


def mcmc_section(b: _Builder) -> Section | None:
    """Sampler diagnostics per dataset, rank plots and weight summaries of a few cells."""
    results = b.results
    section = Section("MCMC diagnostics", "mcmc")
    section.blocks.append(
        Paragraph.of(
            "R-hat and ESS are computed on test predictions, which are identifiable. Weight "
            "R-hat is shown for completeness but is uninformative: weights are non-identifiable "
            "(permuting hidden units or flipping their signs gives the same network, so chains "
            "can settle in different, equivalent modes: label-switching)."
        )
    )
    for dataset in results.datasets():
        table = b.safe(f"{dataset} sampler table", tables.sampler_table, results, dataset)
        if table is not None:
            section.children.append(Section(dataset, slug("mcmc", dataset), [table]))
    for cell_id in _rank_cells(results):
        blocks: list[Any] = []
        _add(blocks, b.safe(f"rank plot {cell_id}", figures.rank_plot, results, cell_id))
        summary = b.safe(f"az.summary {cell_id}", _weight_frame, results, cell_id)
        if summary is not None:
            _add(blocks, tables.weight_diagnostics_table(*summary, cell_id))
        if blocks:
            section.children.append(Section(f"Weights of {cell_id}", slug("rank", cell_id), blocks))
    return section if section.children else None


def _weight_frame(results: SuiteResults, cell_id: str) -> tuple[pd.DataFrame, bool] | None:
    posterior = results.group(cell_id, "posterior")
    return stats.weight_diagnostics(posterior) if posterior else None


def loo_section(b: _Builder) -> Section | None:
    """PSIS-LOO comparisons across methods."""
    results = b.results
    if not b.with_loo:
        note = Paragraph.of("Computed when the sweep has finished.")
        return Section("Model comparison (PSIS-LOO)", "loo", [note])
    loo = b.loo.result if b.loo is not None else lambda: stats.loo_compare(results)
    compare = b.safe("PSIS-LOO comparison", loo)
    if compare is None or compare.empty:
        return None
    section = Section("Model comparison (PSIS-LOO)", "loo")
    for dataset in results.datasets():
        table, details = tables.loo_table(compare, dataset)
        if table is not None:
            section.children.append(
                Section(dataset, slug("loo", dataset), [table, *([details] if details else [])])
            )
    return section if section.children else None


def backends_section(b: _Builder) -> Section | None:
    """The same method on Pyro and NumPyro, where the settings were identical."""
    tables = b.safe("backends tables", backend_tables, b.results)
    if not tables:
        return None
    intro = Paragraph.of(
        "The same model, data, seeds and method options compiled to Pyro (PyTorch) and NumPyro "
        "(JAX). Quality should agree up to Monte Carlo error; cost shows what each PPL charges."
    )
    return Section("Backends: Pyro vs NumPyro", "backends", [intro, *tables])


def reference_section(b: _Builder) -> Section | None:
    """Each dataset's reference posteriors and every cell's distance to them."""
    results = b.results
    if not results.references:
        return None
    section = Section("Against the reference posterior", "reference")
    section.blocks.append(
        Paragraph.of(
            "A reference posterior is a chain ensemble on the same model and split: chains "
            "started at the members of a deep ensemble, each judged on its own, stuck ones "
            "dropped (",
            *_cited(CONCEPTS["chain ensemble"].citations),
            "). Its floor, the distance between two halves of its chains measured as the "
            "contestants' distance is, is how finely it can tell a fit from itself: each cell "
            "is compared with its split's reference, and its distance shown beside the floor "
            '("k\u00d7 the floor", or within it "indistinguishable from the reference"; ',
            IZMAILOV,
            "). Fidelity ranks only where every reference of a dataset has a floor.",
        )
    )
    for dataset in results.datasets():
        blocks: list[Any] = []
        _add(blocks, b.safe(f"{dataset} references", reference_info_table, results, dataset))
        _add(blocks, b.safe(f"{dataset} fidelity", tables.fidelity_table, results, dataset))
        if blocks:
            section.children.append(Section(dataset, slug("reference", dataset), blocks))
    return section


def environment_section(results: SuiteResults) -> Section | None:
    """Git commit, date, machine and library versions of the run."""
    env = dict(results.suite.get("environment") or {})
    if not env and results.records:
        first = results.records[0]
        env = {"versions": first.get("versions") or {}, "machine": first.get("machine") or {}}
    if not env:
        return None
    section = Section("Environment", "environment")
    general = {k: v for k, v in env.items() if k not in ("versions", "machine")}
    if results.suite.get("wall_s") is not None:
        general["last run's wall time (s)"] = round(float(results.suite["wall_s"]), 1)
    for items, caption in (
        (general, "Run (from suite.json)."),
        (env.get("machine") or {}, "Machine."),
        (env.get("versions") or {}, "Library versions."),
    ):
        table = tables.key_value_table(items, caption)
        if table is not None:
            section.blocks.append(table)
    return section if section.blocks else None
