"""Our UCI figures beside the published ones (typed in from their sources, labelled with them):
per dataset, and one row per dataset for the whole suite."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ppl_bnn.report import fmt
from ppl_bnn.report.document import Inline, Link, Table
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import SuiteResults, backend_key, method_key
from ppl_bnn.report.published_figures import PublishedRegression, published_regression_for
from ppl_bnn.report.stats import group_stats
from ppl_bnn.report.tables import present, stat_cell


def per_dataset(results: SuiteResults, dataset: str) -> Table | None:
    """Our test RMSE / log-likelihood beside published figures for a UCI dataset."""
    refs = published_regression_for(dataset)
    if not refs:
        return None
    cells = results.cells[results.cells["dataset"] == dataset]
    cols = present(cells, ["test_ll", "rmse"])
    rows: list[tuple[Inline, ...]] = []
    classes = []
    if cols:
        stats = group_stats(cells, cols)

        def canonical(item: tuple[Any, pd.Series]) -> tuple[Any, ...]:
            return method_key(item[1]["method"]), backend_key(item[1]["backend"])

        for _, row in sorted(stats.iterrows(), key=canonical):
            group = cells[(cells["method"] == row["method"]) & (cells["backend"] == row["backend"])]
            splits = group["split"].nunique()
            hidden = _hidden(results, group.iloc[0]["cell_id"])
            rows.append(
                (
                    f"{row['method']} · {row['backend']}",
                    "this suite",
                    str(splits),
                    hidden,
                    *(
                        stat_cell(row, c, int(row["cells"]), False)
                        for c in ("test_ll", "rmse")
                        if c in cols
                    ),
                )
            )
            classes.append("")
    shown = cols or ["test_ll", "rmse"]
    for ref in refs:
        values = {c: _published_value(ref, c) for c in ("test_ll", "rmse")}
        source = Link(ref.source.label, ref.source.url)
        splits, hidden = _published_setup(ref.dataset)
        rows.append((ref.method, source, splits, hidden, *(values[c] for c in shown)))
        classes.append("published")
    header = ("method", "source", "splits", "hidden units", *(label(c) for c in shown))
    caption = (
        "Ours (mean ± SE over the splits run here) beside published figures (test log-likelihood "
        "and RMSE in original units, mean over the standard splits, ± SE where the source gives "
        "it). Published numbers are typed in from their sources, not computed here; they are "
        "comparable only for the same splits and architecture."
    )
    numeric = (False, False, True, False, *(True for _ in shown))
    return Table(header, tuple(rows), caption, tuple(classes), numeric)


def overview(results: SuiteResults, column: str) -> Table | None:
    """Every UCI dataset of the suite in one row: our (method, backend) means ± SE of ``column``
    (``test_ll`` or ``rmse``) beside the published figures."""
    datasets = [d for d in results.datasets() if published_regression_for(d)]
    if not datasets or column not in results.cells:
        return None
    cells = results.cells[results.cells["dataset"].isin(datasets)]
    stats = group_stats(cells, [column], by=("dataset", "method", "backend"))
    if stats.empty:
        return None
    ours = sorted(
        set(zip(stats["method"], stats["backend"], strict=True)),
        key=lambda g: (method_key(g[0]), backend_key(g[1])),
    )
    published = [r.method for r in published_regression_for(datasets[0])]
    rows = []
    for dataset in datasets:
        mine = stats[stats["dataset"] == dataset].set_index(["method", "backend"])
        cells_row: list[Inline] = [dataset]
        for group in ours:
            if group in mine.index and mine.loc[group, f"{column}:n"]:
                n = int(mine.loc[group, f"{column}:n"])
                cells_row.append(
                    fmt.mean_se(mine.loc[group, f"{column}:mean"], mine.loc[group, f"{column}:se"])
                    + f" (n={n})"
                )
            else:
                cells_row.append("")
        refs = {r.method: r for r in published_regression_for(dataset)}
        cells_row += [_published_value(refs[m], column) for m in published]
        rows.append(tuple(cells_row))
    header = ("dataset", *(f"{m} · {b}" for m, b in ours), *published)
    caption = (
        f"{label(column)} in original units: ours, mean ± SE over the splits run here (n), beside "
        "the published means over all standard splits, ± SE where the source gives it (MC "
        "dropout: Gal & Ghahramani 2016, Table 1, and its 2018 grid-search re-run, both from the "
        "repository readme; PBP: as listed there; deep ensembles: Lakshminarayanan et al. 2017, "
        "Table 1), typed in from their sources. Comparable only for the same splits and "
        "architecture."
    )
    numeric = (False, *(True for _ in header[1:]))
    return Table(header, tuple(rows), caption, (), numeric)


def _published_value(ref: PublishedRegression, column: str) -> str:
    """A published ``test_ll`` or ``rmse``, ``mean ± SE`` where the source gives the SE."""
    se = getattr(ref, f"{column}_se")
    mean = getattr(ref, column)
    return fmt.number(mean, 3) if se is None else f"{mean:.2f} ± {se:.2f}"


def _published_setup(uci_dataset: str) -> tuple[str, str]:
    """Splits and hidden units behind the published figures (protein: 5 splits, 100 units)."""
    return ("5", "100") if uci_dataset.startswith("protein") else ("20", "50")


def _hidden(results: SuiteResults, cell_id: str) -> str:
    model = (results.record(cell_id).get("config") or {}).get("model") or {}
    hidden = model.get("hidden")
    if hidden is None:
        return ""
    return " \u00d7 ".join(str(h) for h in hidden) if isinstance(hidden, list) else str(hidden)
