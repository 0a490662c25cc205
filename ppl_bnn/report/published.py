"""Our test accuracy and NLL beside the published MNIST figures
(:func:`ppl_bnn.report.published_figures.published_classification_for`)."""

from __future__ import annotations

from ppl_bnn.report import fmt
from ppl_bnn.report.document import Inline, Link, Table
from ppl_bnn.report.load import SuiteResults
from ppl_bnn.report.published_figures import published_classification_for
from ppl_bnn.report.stats import group_stats

_COLUMNS = ("accuracy", "nll")


def published_classification_table(results: SuiteResults, dataset: str) -> Table | None:
    """Ours (mean ± SE over cells) per (method, backend), then each published figure with its
    source; None for a dataset without published figures."""
    refs = published_classification_for(dataset)
    if not refs:
        return None
    cells = results.cells[results.cells["dataset"] == dataset]
    rows: list[tuple[Inline, ...]] = []
    classes: list[str] = []
    cols = [c for c in _COLUMNS if c in cells.columns]
    if cols and not cells.empty:
        for _, row in group_stats(cells, cols).iterrows():
            values = [
                fmt.mean_se(row[f"{c}:mean"], row[f"{c}:se"]) if row.get(f"{c}:n", 0) else ""
                for c in _COLUMNS
                if c in cols
            ]
            values += [""] * (len(_COLUMNS) - len(values))
            rows.append((f"{row['method']} · {row['backend']}", "this suite", *values))
            classes.append("")
    for ref in refs:
        nll = "" if ref.nll is None else fmt.number(ref.nll, 2)
        source = Link(ref.source.label, ref.source.url)
        rows.append((ref.model, source, fmt.number(ref.accuracy, 3), nll))
        classes.append("published")
    caption = (
        "Ours (test accuracy and NLL in nats, mean ± SE over the cells run here) beside "
        "published figures for the same architecture on the full MNIST test set, typed in from "
        "their sources, not computed here. Ours are scored on the suite's test subset "
        "(max_test)."
    )
    header = ("model", "source", "accuracy", "NLL")
    return Table(header, tuple(rows), caption, tuple(classes), (False, False, True, True))
