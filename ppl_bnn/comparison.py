"""``Comparison``: what :func:`ppl_bnn.compare` returns, read from its results folder.

Everything is read from the stored records (nothing is refitted): a tidy table with one row per
cell, the verdict the report's Summary shows (:class:`Verdict`, with a plain-text ``str()``), the
report itself, and each cell's :class:`~ppl_bnn.results.FitResult`, loaded on access, in the
data's own units (:attr:`Comparison.recommended`, :meth:`Comparison.fit_for`).
"""

from __future__ import annotations

import html
import logging
import math
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from ppl_bnn.bench.record import COMPLETE, RECORD_FILE, cell_dirs
from ppl_bnn.report import HTML_FILE, fmt, render_report, report_is_current
from ppl_bnn.report.answer import recommendations
from ppl_bnn.report.document import Figure
from ppl_bnn.report.fidelity import COLUMNS as FIDELITY_COLUMNS
from ppl_bnn.report.fidelity import with_fidelity
from ppl_bnn.report.figures import DATASET_FIGURES
from ppl_bnn.report.load import SuiteResults, load_results
from ppl_bnn.report.recommend import COST, Grade, Recommendation, with_cost
from ppl_bnn.report.reference_entries import (
    REFERENCE_RETRY,
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
from ppl_bnn.report.summary import Point, pareto_front, points
from ppl_bnn.results import META_FILE, FitResult

logger = logging.getLogger(__name__)

#: The table's quality columns, in order, where the cells have them.
QUALITY_COLUMNS = (
    "test_ll", "rmse", "crps", "coverage_90", "accuracy", "nll", "brier", "ece",
)  # fmt: skip


@dataclass(frozen=True, repr=False)
class Verdict:
    """The Summary of one dataset as objects: the recommendation, whether its references
    passed their gate, i.e. have a floor (the condition for ranking on fidelity), the front of
    quality against cost on the recommendation's basis, and the contestants to avoid. Its
    ``repr`` and ``str`` are the text a reader wants (:meth:`lines`)."""

    #: The dataset's label.
    dataset: str
    #: Its :class:`~ppl_bnn.report.recommend.Recommendation` (grades, basis).
    recommendation: Recommendation
    #: Its reference posteriors, one per split that has one.
    references: tuple[ReferenceEntry, ...]
    #: Whether fidelity ranks, i.e. every computable reference passed its gate: has a floor.
    reference_passed: bool
    #: The Pareto front on the basis, cheapest first (no other contestant is both cheaper and
    #: better).
    front: tuple[Point, ...]

    @property
    def closest(self) -> str | None:
        """``method/backend`` closest to a reference with a floor, or None where fidelity does
        not rank (no reference, or one without a floor)."""
        top = self.recommendation.trusted
        return top.name if self.reference_passed and top is not None else None

    @property
    def avoid(self) -> list[str]:
        """``method/backend (why)`` of every contestant to avoid (unusable, diverged,
        over-confident out of range)."""
        return [f"{s.name} ({s.why})" for s in self.recommendation.graded(Grade.AVOID)]

    def reference_line(self) -> str:
        """The reference the ranking is against (its chain ensemble and floor), and if none,
        why not: none requested, infeasible, failed or timed out (with the cause and the
        remedy), or no floor (with why and what to try)."""
        usable = [e for e in self.references if e.usable]
        failure = reference_failure(self.references)
        # A split whose reference failed beside others that have one.
        also = "" if failure is None else f" {fmt.capital(failure)}; {REFERENCE_RETRY}."
        if not usable and failure is not None:
            return (
                f"{fmt.capital(failure)}: ranked on held-out test log-likelihood and cost; "
                f"{REFERENCE_RETRY}."
            )
        if not usable:
            notes = "; ".join(sorted({e.note or e.status for e in self.references}))
            why = f" ({notes})" if notes else ""
            return f"No reference posterior{why}: ranked on held-out test log-likelihood and cost."
        if self.reference_passed:
            return f"Reference posterior: {ensemble_description(usable)}{also}"
        bad = [e for e in usable if not e.passed]
        return (
            f"{NOT_RANKED.capitalize()} ({no_floor_detail(bad, usable)}); ranked on held-out "
            f"test log-likelihood instead. Try {floor_remedy(bad)}.{also}"
        )

    def front_line(self) -> str:
        """The Pareto front as one line, each contestant's cost and quality, cheapest first."""
        basis = self.recommendation.basis
        if basis is None or not self.front:
            return "Front: none (no contestant could be ranked)."
        parts = [
            f"{p.group[0]}/{p.group[1]} {fmt.number(p.cost)} s, {basis.name} "
            f"{fmt.number(p.quality)}"
            for p in self.front
        ]
        return f"Front (cost against {basis.name}, cheapest first): " + "; ".join(parts) + "."

    def lines(self) -> list[str]:
        """The verdict as lines of text, an empty string where a line does not apply;
        ``str()`` joins the others."""
        closest = self.closest
        return [
            f"{self.dataset}: {self.recommendation.sentence()}",
            self.reference_line(),
            f"Closest to the reference: {closest}." if closest else "",
            self.front_line(),
            "Unusable or to avoid: " + ("; ".join(self.avoid) or "none") + ".",
        ]

    def __str__(self) -> str:
        return "\n".join(line for line in self.lines() if line)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.lines()[1:] if line)
        head = html.escape(self.lines()[0])
        return f"<p><strong>{head}</strong></p><ul>{items}</ul>"


#: The names of the figures :meth:`Comparison.figure` draws, in the report's order.
FIGURES: tuple[str, ...] = tuple(draw.__name__ for draw in DATASET_FIGURES)


class UnitsUnknownWarning(UserWarning):
    """A comparison's fit was saved without its data's units (by a version of ppl_bnn before
    fits carried them): it predicts from and in the standardised units it was fitted in."""


def _no_units(cell_id: str) -> str:
    return (
        f"the fit of cell {cell_id} was saved without its data's units: its predict takes "
        "inputs standardised as its training split's and returns a standardised predictive; "
        "delete the cell's folder and run the comparison again to refit it with its units"
    )


class _LazyFits(Mapping[str, FitResult]):
    """Cell id -> its :class:`FitResult`, read from the cell's folder when first asked for."""

    def __init__(self, cells_dir: Path, ids: list[str]) -> None:
        self._dir, self._ids, self._loaded = cells_dir, ids, {}

    def __getitem__(self, cell_id: str) -> FitResult:
        if cell_id not in self._ids:
            raise KeyError(f"no fitted cell {cell_id!r}; cells: {', '.join(self._ids)}")
        if cell_id not in self._loaded:
            fit = FitResult.load(self._dir / cell_id)
            if fit.units is None:
                warnings.warn(UnitsUnknownWarning(_no_units(cell_id)), stacklevel=2)
            self._loaded[cell_id] = fit
        return self._loaded[cell_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def _check_results_dir(path: Path) -> None:
    """Refuse what is not the results folder of a comparison: a missing path, a file, a folder
    without a cell record."""
    if not path.exists():
        raise FileNotFoundError(f"results folder {path} does not exist")
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is a file, not a results folder")
    if not any((folder / RECORD_FILE).is_file() for folder in cell_dirs(path)):
        raise ValueError(
            f"{path} holds no cells of a comparison (no cells/<cell_id>/{RECORD_FILE}): "
            "expected a results folder written by ppl_bnn.compare or `ppl-bnn compare`"
        )


class Comparison:
    """The methods compared on one model and dataset, read from ``results_dir``: one row per
    cell (:attr:`table`), the verdict (:attr:`summary`) and each cell's
    :class:`~ppl_bnn.results.FitResult` (:attr:`results`, loaded on access).

    Attributes:
        results_dir: The results folder (cells, references, the data's split rows).

    Raises:
        FileNotFoundError: ``results_dir`` does not exist.
        NotADirectoryError: It is a file.
        ValueError: It holds no cell record (``cells/<cell_id>/record.json``).
    """

    def __init__(self, results_dir: str | Path) -> None:
        self.results_dir = Path(results_dir)
        _check_results_dir(self.results_dir)

    def __repr__(self) -> str:
        return f"Comparison({str(self.results_dir)!r}, {len(self._results.cells)} cells)"

    @cached_property
    def _results(self) -> SuiteResults:
        return with_fidelity(load_results(self.results_dir))

    @property
    def dataset(self) -> str:
        """The dataset's label (the one dataset a comparison holds)."""
        return self._results.datasets()[0]

    @cached_property
    def table(self) -> pd.DataFrame:
        """One row per cell, with columns ``cell_id`` (its key in :attr:`results`), ``method``
        (a tuned contestant as ``map (tuned)``), ``backend``, ``split``, ``seed``, ``status``,
        then the quality metrics (test log-likelihood per point in original units; RMSE, CRPS
        and 90% coverage, or accuracy, NLL, Brier and ECE), the distances to the reference
        posterior (NaN where there is none) with ``ref_floor_ratio`` (each cell's distance over
        its reference's floor; at most 1: indistinguishable from the reference),
        ``reference_passed`` (whether its reference has a floor), and the cost in seconds:
        ``fit_s`` (inside ``fit``), ``compile_s`` (of it, compiling), ``tuning_s`` (a tuned
        contestant's grid) and ``cost_s`` (fit and tuning without compilation: what the Summary
        ranks cost on)."""
        cells = with_cost(self._results.cells)
        out = pd.DataFrame(
            {
                "cell_id": cells["cell_id"],
                "method": cells["method"],
                "backend": cells["backend"],
                "split": cells["split"].astype(int),
                "seed": cells["seed"].astype(int),
                "status": cells["status"],
            }
        )
        for column in (*QUALITY_COLUMNS, *FIDELITY_COLUMNS):
            if column in cells and cells[column].notna().any():
                out[column] = cells[column].astype(float)
        if "ref_passed" in cells:
            out["reference_passed"] = cells["ref_passed"].astype("boolean")
        timings = {"fit_s": "time_total", "compile_s": "time_compile", "tuning_s": "time_tuning"}
        for name, column in timings.items():
            out[name] = cells[column].astype(float) if column in cells else math.nan
        out["cost_s"] = cells[COST].astype(float)
        return out.reset_index(drop=True)

    @cached_property
    def summary(self) -> Verdict:
        """The verdict the report's Summary shows, with a plain-text ``str()``."""
        results = self._results
        dataset = self.dataset
        rec = recommendations(results)[dataset]
        references = tuple(results.references_of(dataset))
        front: list[Point] = []
        if rec.basis is not None:
            cells = results.cells[results.cells["dataset"] == dataset]
            front = pareto_front(points(cells, rec.basis.column), rec.basis.lower)
        return Verdict(dataset, rec, references, references_pass(references), tuple(front))

    @cached_property
    def results(self) -> Mapping[str, FitResult]:
        """Cell id -> :class:`~ppl_bnn.results.FitResult` of every cell with a result, each read
        from its folder when first asked for (a fit saved without its data's units warns with
        :class:`UnitsUnknownWarning`)."""
        cells_dir = self.results_dir / "cells"
        ids = [
            r["cell_id"]
            for r in self._results.records
            if r.get("status") in COMPLETE and (cells_dir / r["cell_id"] / META_FILE).is_file()
        ]
        return _LazyFits(cells_dir, ids)

    def fit_for(self, method: str, backend: str, seed: int | None = None) -> FitResult:
        """The fit of contestant ``method`` (a tuned one as ``"map (tuned)"``) on ``backend``
        at ``seed`` (default: its lowest seed with a result). Its ``predict`` takes inputs in
        the data's own units and returns the predictive in the target's.

        Raises:
            ValueError: No such contestant, or no fit of it at ``seed``; the message lists
                what there is. Or the fit was saved without its data's units, so it cannot
                predict in them.
        """
        table = self.table
        fitted = table[table["cell_id"].isin(list(self.results))]
        rows = fitted[(fitted["method"] == method) & (fitted["backend"] == backend)]
        if rows.empty:
            there = sorted(set(fitted["method"] + "/" + fitted["backend"]))
            raise ValueError(
                f"no fit of {method}/{backend} in {self.results_dir}; contestants with fits: "
                f"{', '.join(there) or 'none'}"
            )
        if seed is not None:
            chosen = rows[rows["seed"] == seed]
            if chosen.empty:
                seeds = ", ".join(str(s) for s in sorted(rows["seed"]))
                raise ValueError(f"no fit of {method}/{backend} at seed {seed}; seeds: {seeds}")
            rows = chosen
        cell_id = rows.sort_values(["seed", "split"])["cell_id"].iloc[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnitsUnknownWarning)
            fit = self.results[cell_id]
        if fit.units is None:
            raise ValueError(_no_units(cell_id))
        return fit

    @property
    def recommended(self) -> FitResult:
        """The fit the Summary recommends: the cheapest contestant shown as good as the trusted
        one, else the trusted one (its lowest seed, see :meth:`fit_for`).

        Raises:
            ValueError: Nothing could be trusted (no contestant was ranked).
        """
        rec = self.summary.recommendation
        chosen = rec.cheapest_as_good or rec.trusted
        if chosen is None:
            raise ValueError(
                f"{self.results_dir}: no contestant could be ranked, so none is recommended; "
                "see the report's Summary, and use fit_for(method, backend) for a given fit"
            )
        logger.info("recommended: %s", chosen.name)
        return self.fit_for(*chosen.group)

    def figure(self, name: str = "runtime_quality") -> Figure:
        """One of the report's figures of this comparison, drawn from the stored results; a
        notebook shows it inline. ``name``: one of :data:`FIGURES` (default: cost against test
        log-likelihood, each contestant's mean ± standard error).

        Raises:
            ValueError: An unknown name (the message lists them), or one with nothing to draw
                here (``fits_1d`` needs one input column, ``training_curves`` an SVI fit, ...).
        """
        draws = {draw.__name__: draw for draw in DATASET_FIGURES}
        if name not in draws:
            raise ValueError(f"unknown figure {name!r}; figures: {', '.join(FIGURES)}")
        drawn = draws[name](self._results, self.dataset)
        if drawn is None:
            raise ValueError(f"{self.results_dir}: nothing to draw in figure {name!r} here")
        return drawn

    def report(self, path: str | Path | None = None) -> Path:
        """Write the self-contained HTML report (and ``report.md``, ``results.csv``,
        ``summary.json``) into folder ``path`` (default: the results folder); returns the HTML
        file's path. In the results folder, a report rendered from what it holds now is kept
        as it is (nothing to render again)."""
        if path is None and report_is_current(self.results_dir):
            logger.info("the report %s is current", self.results_dir / HTML_FILE)
            return self.results_dir / HTML_FILE
        return render_report(self.results_dir, path)

    def _repr_html_(self) -> str:
        return self.summary._repr_html_()
