"""Each backend against the default one (Pyro against NumPyro), compared fairly: the same
settings, paired replicates, the noise shown.

A method is compared across two backends on a dataset only where both ran it with identical
settings (the suite's options for the cell, and neither with a reduced budget): the quality
difference (e.g. Pyro - NumPyro) is the mean of paired differences over (split, seed) with its
standard error, shown beside the seed-to-seed spread (standard deviation) of the metric within
the default backend.
A difference that a paired t-test at the 5% level does not tell from zero
(:func:`ppl_bnn.report.ranking.clear`) is reported as agreement, never as a win. Pairs whose
settings differ are listed with what differs, and not compared. Distances to the reference
posterior are compared only where the dataset's references have a floor
(:func:`~ppl_bnn.report.reference_entries.references_pass`).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.engine.registry import DEFAULT_BACKEND, backend_names
from ppl_bnn.report import fmt
from ppl_bnn.report.document import Inline, Table
from ppl_bnn.report.glossary import label
from ppl_bnn.report.load import SuiteResults, method_key
from ppl_bnn.report.ranking import REPLICATE, clear, reduced
from ppl_bnn.report.reference_entries import references_pass
from ppl_bnn.report.stats import WITH_METRICS

TEST_QUALITY = ("test_ll", "rmse", "accuracy", "nll")
QUALITY = (*TEST_QUALITY, "ref_w2", "ref_tv")
COSTS = ("time_total", "s_per_grad", "s_per_step")


def _settings(results: SuiteResults, cell_id: str) -> str:
    """The suite options of a cell as canonical JSON (what must match across backends)."""
    options = (results.record(cell_id).get("config") or {}).get("options") or {}
    return json.dumps(options, sort_keys=True)


def _differences(a: pd.DataFrame, b: pd.DataFrame, column: str) -> tuple[float, float, int, float]:
    """Mean paired difference a - b of ``column``, its standard error, the pairs, and the
    standard deviation of ``column`` over b's replicates."""
    left = a.set_index(list(REPLICATE))[column].astype(float)
    right = b.set_index(list(REPLICATE))[column].astype(float)
    common = left.index.intersection(right.index)
    d = (left.loc[common] - right.loc[common]).to_numpy()
    d = d[np.isfinite(d)]
    spread = right.to_numpy()
    spread = spread[np.isfinite(spread)]
    sd = float(spread.std(ddof=1)) if len(spread) > 1 else math.nan
    if len(d) == 0:
        return math.nan, math.nan, 0, sd
    se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
    return float(d.mean()), se, len(d), sd


def _ratio(a: pd.DataFrame, b: pd.DataFrame, column: str) -> float:
    """Geometric mean over paired replicates of a / b."""
    left = a.set_index(list(REPLICATE))[column].astype(float)
    right = b.set_index(list(REPLICATE))[column].astype(float)
    common = left.index.intersection(right.index)
    with np.errstate(all="ignore"):
        logs = np.log(left.loc[common].to_numpy()) - np.log(right.loc[common].to_numpy())
    logs = logs[np.isfinite(logs)]
    return float(np.exp(logs.mean())) if len(logs) else math.nan


def _verdict(diff: float, se: float, pairs: int) -> str:
    if pairs < 2 or not np.isfinite(se):
        return "too few pairs"
    return "differ" if clear(diff, se, pairs) else "agree"


def comparisons(
    results: SuiteResults, other: str, base: str = DEFAULT_BACKEND
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Backend ``other`` against ``base``: ``(compared, not_compared)``.

    ``compared``: per (dataset, method, column) with identical settings on both backends, the
    paired difference ``other - base``, its standard error, pairs, ``base``'s seed-to-seed
    standard deviation and the verdict; plus cost ratios. ``not_compared``: (dataset, method,
    what differs).
    """
    cells = results.cells
    compared: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    if cells.empty:
        return pd.DataFrame(compared), pd.DataFrame(skipped)
    used = cells[cells["status"].isin(WITH_METRICS)]
    for (dataset, method), group in used.groupby(["dataset", "method"], sort=False):
        a, b = group[group["backend"] == other], group[group["backend"] == base]
        if a.empty or b.empty:
            continue
        pair = pd.concat([a, b])
        settings = {_settings(results, c) for c in pair["cell_id"]}
        noted = reduced(pair).any()
        if len(settings) > 1 or noted:
            why = "a reduced budget" if noted else "different options"
            skipped.append({"dataset": dataset, "method": method, "why": why})
            continue
        row: dict[str, Any] = {"dataset": dataset, "method": method}
        passed = references_pass(results.references_of(dataset))
        for column in QUALITY if passed else TEST_QUALITY:
            if column in group and group[column].notna().any():
                diff, se, pairs, sd = _differences(a, b, column)
                row[column] = (diff, se, pairs, sd, _verdict(diff, se, pairs))
        for column in COSTS:
            if column in group and group[column].notna().any():
                row[f"{column}:ratio"] = _ratio(a, b, column)
        compared.append(row)
    return pd.DataFrame(compared), pd.DataFrame(skipped)


def backend_tables(results: SuiteResults) -> list[Table]:
    """For each backend that ran besides the default one: the comparison table (per dataset,
    method and quality metric: that backend - the default ± SE) and the table of pairs not
    compared, where there are any."""
    ran = set(results.cells["backend"]) if not results.cells.empty else set()
    tables = []
    for other in (b for b in backend_names() if b != DEFAULT_BACKEND and b in ran):
        compared, skipped = comparisons(results, other)
        if not compared.empty:
            tables.append(_compared_table(compared, other, DEFAULT_BACKEND))
        if not skipped.empty:
            tables.append(_skipped_table(skipped))
    return tables


def _compared_table(compared: pd.DataFrame, other: str, base: str) -> Table:
    rows: list[tuple[Inline, ...]] = []
    for _, row in compared.sort_values("method", key=lambda s: s.map(method_key)).iterrows():
        ratio = fmt.ratio(row.get("time_total:ratio"))
        for column in QUALITY:
            value = row.get(column)
            if not isinstance(value, tuple):
                continue
            diff, se, pairs, sd, verdict = value
            rows.append(
                (
                    row["dataset"],
                    row["method"],
                    label(column),
                    str(pairs),
                    fmt.mean_se(diff, se),
                    fmt.number(sd),
                    verdict,
                    ratio,
                )
            )
    header = (
        "dataset", "method", "metric", "pairs", f"{other} - {base}", f"{base} seed sd",
        "verdict", f"fit time {other}/{base}",
    )  # fmt: skip
    caption = (
        f"The same method with identical settings on {other} and {base}, paired on (split, "
        f"seed): the mean difference {other} - {base} ± its standard error, beside the "
        f"seed-to-seed standard deviation of the metric within {base}; 'agree' unless a paired "
        "t-test at the 5% level tells the difference from zero (the parity tests check the two "
        "log densities are the same). Fit time: geometric mean of the ratio over pairs."
    )
    numeric = (False, False, False, True, True, True, False, True)
    classes = tuple("problem" if r[6] == "differ" else "" for r in rows)
    return Table(header, tuple(rows), caption, classes, numeric)


def _skipped_table(skipped: pd.DataFrame) -> Table:
    rows = tuple((r["dataset"], r["method"], r["why"]) for _, r in skipped.iterrows())
    caption = (
        "Run on both backends but not compared: their settings differ (a reduced budget on one "
        "backend, marked † in every table), so a difference would say nothing about the backends."
    )
    return Table(("dataset", "method", "why not compared"), rows, caption, (), ())
