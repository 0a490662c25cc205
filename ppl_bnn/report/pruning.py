"""The pruning table: test quality against the share of weights removed by signal-to-noise
|mu|/sigma (Blundell et al. 2015), with their published figures beside the MNIST MLPs'."""

from __future__ import annotations

import math

import numpy as np

from ppl_bnn.report import fmt
from ppl_bnn.report.document import Inline, Link, Table
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import SuiteResults, backend_key, method_key
from ppl_bnn.report.published_figures import published_pruning_for


def pruning_table(results: SuiteResults, dataset: str) -> Table | None:
    """Test quality against the share of weights pruned by |mu|/sigma (Blundell et al. 2015),
    with their published test errors (%) beside ours where the dataset has them
    (:func:`ppl_bnn.report.published_figures.published_pruning_for`)."""
    cells = results.cells[results.cells["dataset"] == dataset]
    curves: dict[tuple[str, str], list[dict]] = {}
    hidden: dict[tuple[int, ...], None] = {}
    for _, row in cells[cells["status"].isin(("ok", "diverged"))].iterrows():
        record = results.record(row["cell_id"])
        curve = (record.get("curves") or {}).get("pruning")
        if curve and curve.get("fraction"):
            curves.setdefault((row["method"], row["backend"]), []).append(curve)
            model = (record.get("config") or {}).get("model") or {}
            if model.get("hidden") is not None and model.get("layers") is None:
                hidden[tuple(model["hidden"])] = None
    if not curves:
        return None
    fractions = list(next(iter(curves.values()))[0]["fraction"])
    refs = published_pruning_for(dataset)
    # Test error (%) where published figures stand beside ours, accuracy elsewhere.
    keys = ("test_ll", "rmse", "test_error" if refs else "accuracy")
    rows: list[tuple[Inline, ...]] = []
    for (method, backend), group in sorted(
        curves.items(), key=lambda kv: (method_key(kv[0][0]), backend_key(kv[0][1]))
    ):
        for key in keys:
            series = [_pruning_series(c, key) for c in group if list(c["fraction"]) == fractions]
            series = [s for s in series if s is not None]
            if not series:
                continue
            values = np.array([[np.nan if v is None else v for v in s] for s in series], float)
            means = np.nanmean(values, axis=0) if np.isfinite(values).any() else values[0]
            rows.append(
                (method, backend, _PRUNING_LABELS.get(key) or label(key), *map(fmt.number, means))
            )
    classes = [""] * len(rows)
    for ref in refs:
        published = dict(ref.test_error)
        values = [
            next((fmt.number(e) for f, e in published.items() if math.isclose(f, x)), "")
            for x in fractions
        ]
        source = Link(ref.source.label, ref.source.url)
        rows.append((ref.model, source, _PRUNING_LABELS["test_error"], *values))
        classes.append("published")
    header = (
        "method",
        "backend or source" if refs else "backend",
        "metric",
        *(f"{fmt.number(100 * f)}% pruned" for f in fractions),
    )
    caption = (
        "Weight pruning by signal-to-noise |mu|/sigma (Blundell et al. 2015, Table 2): test "
        "quality after zeroing the given share of weights with the lowest ratio (mean over splits "
        "and seeds; each cell averages the guide's draws with those weights set to 0)."
    )
    if refs:
        ours = " or ".join(_mlp_text(h) for h in hidden) or "this dataset's network"
        caption += (
            " Shaded rows are published figures, typed in from their source (linked), not "
            "computed here: Blundell et al.'s MNIST test error for their own network, an MLP with "
            "two hidden layers of 1,200 units (2.4 million weights). Ours come from "
            f"{ours}, scored on the suite's test subset (max_test): compare how the error grows "
            "as weights are removed, not its level."
        )
    return Table(
        header,
        tuple(rows),
        caption,
        tuple(classes),
        (False, False, False, *(True,) * len(fractions)),
    )


#: Row labels of the pruning table that are not metric names of the glossary.
_PRUNING_LABELS = {"test_error": "test error (%)"}


def _pruning_series(curve: dict, key: str) -> list[float | None] | None:
    """One cell's pruning curve of ``key``; ``test_error`` is 100 (1 - accuracy)."""
    if key != "test_error":
        return curve.get(key)
    accuracy = curve.get("accuracy")
    return None if accuracy is None else [None if a is None else 100 * (1 - a) for a in accuracy]


def _mlp_text(hidden: tuple[int, ...]) -> str:
    """``an MLP with one hidden layer of 1,024 units`` / ``2 hidden layers of 400 units``."""
    if len(set(hidden)) == 1:
        layers = "one hidden layer" if len(hidden) == 1 else f"{len(hidden)} hidden layers"
        return f"an MLP with {layers} of {hidden[0]:,} units"
    return f"an MLP with hidden layers of {', '.join(f'{h:,}' for h in hidden)} units"
