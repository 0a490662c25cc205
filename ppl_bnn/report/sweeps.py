"""Studies: one method fitted once per value of one option on one dataset (a suite's ``sweep``).

A study's cells are not contestants: :func:`ppl_bnn.report.load.load_results` keeps them out of
``cells`` (so out of the Summary, rankings and every dataset table) in ``sweeps``, and they are
shown here only: per study a figure of the 1-D predictive at each value (a row per backend, a
panel per value, shared axes) and a table of each cell's scores.

The default suite's study is the beta sweep of mean-field VI: the beta-ELBO
:math:`\\mathbb E_q[\\log p(y \\mid \\theta)] - \\beta\\,\\mathrm{KL}(q \\| p)` (the objective of
Higgins et al. 2017's beta-VAE), whose :math:`\\beta = 1` is standard VI and whose fit tends to
a point estimate as :math:`\\beta \\to 0`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ppl_bnn.data.synthetic import TRUE_MEANS
from ppl_bnn.methods import get_method
from ppl_bnn.report import fmt
from ppl_bnn.report.document import Figure, Link, Paragraph, Table, slug
from ppl_bnn.report.figures import figure_of
from ppl_bnn.report.load import SuiteResults, backend_key
from ppl_bnn.report.style import method_color

#: How the report names a swept option, and what the option does.
OPTION_SYMBOLS = {"kl_weight": "β"}
OPTION_NOTES = {
    "kl_weight": (
        "β weights the KL term of the ELBO, E_q[log p(y | θ)] - β KL(q ‖ p) (the objective of "
        "Higgins et al. 2017's β-VAE): β = 1 is standard VI; a smaller β lets the data outweigh "
        "the prior, and as β → 0 the fit tends to a point estimate (maximum likelihood)."
    )
}
#: Predictions a panel needs (written by :mod:`ppl_bnn.bench.evaluate` for 1-D sets).
GRID = ("grid_x", "grid_mean", "grid_std", "grid_epistemic_std", "train_x", "train_y")
#: Where the Summary and the overview point to.
ANCHOR = "studies"
INTRO = (
    "A study fits one method once per value of one option, every other setting the same, at the "
    "suite's first seed. Its fits are not contestants: they are left out of the Summary, the "
    "rankings and every table and figure above, and shown here only."
)


@dataclass(frozen=True)
class Study:
    """One sweep: ``method`` on ``dataset`` (its report label) over ``option``'s values.

    Attributes:
        cells: Its rows of :attr:`SuiteResults.sweeps`, with the swept value in ``value``.
    """

    dataset: str
    method: str
    option: str
    cells: pd.DataFrame

    @property
    def symbol(self) -> str:
        """The option as the report writes it (``β`` for ``kl_weight``)."""
        return OPTION_SYMBOLS.get(self.option, self.option)

    @property
    def title(self) -> str:
        return f"{self.symbol} sweep of {self.method} on {self.dataset}"

    @property
    def anchor(self) -> str:
        return slug("study", self.dataset, self.method, self.option)

    @property
    def values(self) -> list[float]:
        """The swept values, largest first."""
        return sorted(set(self.cells["value"].dropna()), reverse=True)

    @property
    def backends(self) -> list[str]:
        return sorted(set(self.cells["backend"]), key=backend_key)

    def at(self, backend: str, value: float) -> pd.DataFrame:
        """The cells of one backend at one swept value."""
        return self.cells[(self.cells["backend"] == backend) & (self.cells["value"] == value)]


def value_text(value: float) -> str:
    """A swept value as text: ``1``, ``0.1``, ``0.0001``."""
    return f"{value:g}"


def studies(results: SuiteResults) -> list[Study]:
    """The suite's studies, in the order their cells were stored."""
    sweeps = results.sweeps
    if sweeps.empty:
        return []
    out = []
    for (dataset, method, option), rows in sweeps.groupby(
        ["dataset", "method", "sweep"], sort=False
    ):
        column = f"options.{option}"
        values = pd.to_numeric(rows[column], errors="coerce") if column in rows else np.nan
        out.append(Study(dataset, method, option, rows.assign(value=values)))
    return out


def summary_note(results: SuiteResults) -> Paragraph | None:
    """The Summary's line saying which studies it leaves out, and where they are."""
    found = studies(results)
    if not found:
        return None
    names = "; ".join(s.title for s in found)
    return Paragraph.of(
        f"Not ranked: {names} ({fmt.number(len(results.sweeps))} cells), a study of one "
        "method's settings rather than a contestant, shown under ",
        Link("Studies", f"#{ANCHOR}"),
        ".",
    )


def _settings(rows: pd.DataFrame, prefix: str, skip: str | None = None) -> str:
    """``key = value`` of the ``prefix.*`` columns that are the same in every row."""
    parts = []
    for column in sorted(c for c in rows.columns if c.startswith(prefix)):
        key = column[len(prefix) :]
        values = rows[column].dropna().unique()
        if key != skip and len(values) == 1:
            value = values[0]
            shown = json.loads(value) if isinstance(value, str) and value[:1] == "[" else value
            parts.append(f"{key} = {shown}")
    return ", ".join(parts)


def describe(study: Study) -> Paragraph:
    """What the study fits: method, dataset, values, model and the options held fixed."""
    rows = study.cells
    method = get_method(study.method, study.backends[0])
    status = rows["status"].value_counts()
    counts = ", ".join(f"{n} {s}" for s, n in status.items())
    splits = ", ".join(str(s) for s in sorted(set(rows["split"])))
    seeds = ", ".join(str(s) for s in sorted(set(rows["seed"])))
    values = ", ".join(value_text(v) for v in study.values)
    text = (
        f"{study.method} ({method.summary}) on {study.dataset}, split {splits}, seed {seeds}, "
        f"at {study.option} = {values} on {', '.join(study.backends)}: {len(rows)} cells "
        f"({counts}). Model: {_settings(rows, 'model.')}. Options held fixed: "
        f"{_settings(rows, 'options.', skip=study.option)}."
    )
    note = OPTION_NOTES.get(study.option)
    return Paragraph.of(text + (f" {note}" if note else ""))


def _first_fit(
    results: SuiteResults, rows: pd.DataFrame
) -> tuple[pd.Series, dict[str, np.ndarray]] | None:
    """The first cell of ``rows`` (ok before diverged, then by split and seed) with a grid."""
    usable = rows[rows["status"].isin(("ok", "diverged"))]
    ordered = usable.assign(_bad=usable["status"] != "ok").sort_values(["_bad", "split", "seed"])
    for _, row in ordered.iterrows():
        pred = results.predictions(row["cell_id"], GRID)
        if pred is not None and all(v in pred for v in GRID):
            return row, pred
    return None


def _sorted_grid(pred: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    order = np.argsort(pred["grid_x"])
    return {k: (v[order] if k.startswith("grid_") else v) for k, v in pred.items()}


def _inside_std(pred: dict[str, np.ndarray]) -> float:
    """Mean epistemic std over the grid points inside the training inputs' range."""
    x = pred["grid_x"]
    inside = (x >= np.min(pred["train_x"])) & (x <= np.max(pred["train_x"]))
    return float(np.mean(pred["grid_epistemic_std"][inside])) if inside.any() else np.nan


def sweep_figure(results: SuiteResults, study: Study) -> Figure | None:
    """The 1-D predictive at each swept value: a row per backend, a panel per value (shared
    axes), each with the mean, ±2 epistemic and ±2 total std, the truth where the set has one,
    and the training points."""
    values, backends = study.values, study.backends
    panels: dict[tuple[str, float], tuple[pd.Series, dict[str, np.ndarray]]] = {}
    for backend in backends:
        for value in values:
            found = _first_fit(results, study.at(backend, value))
            if found is not None:
                panels[backend, value] = (found[0], _sorted_grid(found[1]))
    if not panels:
        return None
    first_row = next(iter(panels.values()))[0]
    dataset_name = str(results.record(first_row["cell_id"])["config"]["dataset"])
    truth = TRUE_MEANS.get(dataset_name)
    color = method_color(study.method)
    nrows, ncols = len(backends), len(values)
    fig = MplFigure(figsize=(2.5 * ncols + 1.6, 2.1 * nrows + 0.3), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    lows, highs = [], []
    for i, backend in enumerate(backends):
        for j, value in enumerate(values):
            ax = axes[i, j]
            ax.set_title(f"{study.symbol} = {value_text(value)} · {backend}", fontsize=9)
            ax.tick_params(labelsize=7)
            if (backend, value) not in panels:
                status = ", ".join(sorted(set(study.at(backend, value)["status"]))) or "not run"
                ax.text(0.5, 0.5, f"no fit ({status})", ha="center", va="center",
                        transform=ax.transAxes, fontsize=8)  # fmt: skip
                continue
            row, pred = panels[backend, value]
            x, mean = pred["grid_x"], pred["grid_mean"]
            epi, total = pred["grid_epistemic_std"], pred["grid_std"]
            ax.fill_between(x, mean - 2 * total, mean + 2 * total, color=color, alpha=0.15, lw=0)
            ax.fill_between(x, mean - 2 * epi, mean + 2 * epi, color=color, alpha=0.4, lw=0)
            ax.plot(x, mean, color=color, lw=1.4)
            if truth is not None:
                ax.plot(x, truth[0](x), color="black", lw=0.9, ls="--")
            ax.scatter(pred["train_x"], pred["train_y"], s=6, color="black", zorder=3, lw=0)
            lows.append(np.min(pred["train_y"]))
            highs.append(np.max(pred["train_y"]))
            if row["status"] != "ok":
                ax.set_title(ax.get_title() + f" ({row['status']})", fontsize=9)
        axes[i, 0].set_ylabel("y", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("x", fontsize=8)
    if lows:
        lo, hi = min(lows), max(highs)
        pad = 0.5 * (hi - lo if hi > lo else 1.0)
        axes[0, 0].set_ylim(lo - pad, hi + pad)
    handles = [
        Line2D([], [], color=color, lw=1.4, label="predictive mean"),
        Patch(color=color, alpha=0.4, lw=0, label="±2 epistemic std"),
        Patch(color=color, alpha=0.15, lw=0, label="±2 total std"),
        Line2D([], [], color="black", marker="o", ls="", ms=3, label="training points"),
    ]
    if truth is not None:
        handles.insert(3, Line2D([], [], color="black", lw=0.9, ls="--", label="truth"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
    caption = _caption(study, panels, truth, dataset_name)
    return figure_of(study.dataset, f"sweep-{study.option}", fig, caption)


def _caption(
    study: Study,
    panels: dict[tuple[str, float], tuple[pd.Series, dict[str, np.ndarray]]],
    truth: tuple[Any, str] | None,
    dataset: str,
) -> str:
    splits = sorted({int(row["split"]) for row, _ in panels.values()})
    seeds = sorted({int(row["seed"]) for row, _ in panels.values()})
    text = (
        f"{study.title}: the posterior predictive on a grid at each {study.symbol} (columns, "
        f"largest first; rows: backends; axes shared), split {', '.join(map(str, splits))}, "
        f"seed {', '.join(map(str, seeds))}. Line: predictive mean; dark band: ±2 epistemic std "
        "(the spread of the network's output over the posterior draws, noise excluded); light "
        "band: ±2 total predictive std (with the noise); "
    )
    if truth is not None:
        text += f"dashed: the truth, {truth[1]}, the noise-free mean of the {dataset} set; "
    text += "dots: training points. Mean epistemic std over the range of the training inputs: "
    per_backend = []
    for backend in study.backends:
        shown = [
            f"{study.symbol} = {value_text(v)}: {fmt.number(_inside_std(panels[backend, v][1]))}"
            for v in study.values
            if (backend, v) in panels
        ]
        if shown:
            per_backend.append(f"{backend} {', '.join(shown)}")
    return text + "; ".join(per_backend) + "."


def sweep_table(results: SuiteResults, study: Study) -> Table:
    """Each cell's status, test scores, epistemic std (inside and outside the training range,
    where the set has those regions) and fit time, by swept value and backend."""
    rows = study.cells.sort_values(
        ["value", "backend", "split"],
        ascending=[False, True, True],
        key=lambda s: s.map(backend_key) if s.name == "backend" else s,
    )
    regions = results_regions(results, rows)
    compile_s = rows.get("time_compile", pd.Series(np.nan, index=rows.index)).fillna(0.0)
    rows = rows.assign(_run_s=rows.get("time_total", np.nan) - compile_s)
    columns = [("test_ll", "test log-lik."), ("rmse", "RMSE")]
    columns += [
        (f"epistemic_std_{part}", f"epistemic std, {name}") for part, name in regions.items()
    ]
    columns += [("_run_s", "fit time without compiling (s)"), ("time_compile", "compile (s)")]
    several = rows["split"].nunique() > 1
    header = (study.symbol, "backend", *(("split",) if several else ()), "status")
    body = []
    for _, row in rows.iterrows():
        ids = (value_text(row["value"]), row["backend"], *((str(row["split"]),) if several else ()))
        scores = tuple(fmt.number(row.get(key, np.nan)) for key, _ in columns)
        body.append((*ids, str(row["status"]), *scores))
    return Table(
        header=(*header, *(name for _, name in columns)),
        rows=tuple(body),
        caption=(
            f"{study.title}: each cell's test log-likelihood and RMSE (original units), mean "
            "epistemic std at the test inputs, and fit time without and for compiling; not "
            "ranked."
        ),
        numeric=(True, False, *((True,) if several else ()), False, *(True,) * len(columns)),
    )


def results_regions(results: SuiteResults, rows: pd.DataFrame) -> dict[str, str]:
    """The test-set regions (``{"in": ..., "out": ...}``) of the study's first cell that has
    them, else {}."""
    for cell_id in rows["cell_id"]:
        regions = results.record(cell_id).get("regions")
        if regions:
            return dict(regions)
    return {}
