"""Report tables: stored results and the frames of :mod:`.stats` formatted as document tables."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.report import fmt
from ppl_bnn.report.document import Details, Inline, Link, Paragraph, Strong, Table
from ppl_bnn.report.glossary import (
    CLASSIFICATION_MAIN,
    COST_METRICS,
    REGRESSION_MAIN,
    SAMPLER_METRICS,
    TIMES_MAIN,
    better,
    label,
)
from ppl_bnn.report.load import SAMPLERS, SuiteResults, backend_key, method_key
from ppl_bnn.report.references import references_for
from ppl_bnn.report.stats import (
    MAX_REFERENCE_POINTS,
    PROBLEM_STATUSES,
    backend_pairs,
    group_stats,
    sort_groups,
    status_counts,
)

BUDGET_MARK = "†"


def _present(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns of ``frame`` that hold at least one finite value."""
    return [c for c in columns if c in frame.columns and np.isfinite(frame[c].astype(float)).any()]


def _best_rows(stats: pd.DataFrame, column: str) -> set[int]:
    """Row positions holding the best mean of ``column`` (needs two or more values)."""
    direction = better(column)
    means = stats[f"{column}:mean"].to_numpy(dtype=float)
    finite = np.isfinite(means)
    if direction is None or finite.sum() < 2:
        return set()
    if direction == "higher":
        score = means
    elif direction == "lower":
        score = -means
    else:
        score = -np.abs(means - float(direction))
    best = np.nanmax(np.where(finite, score, np.nan))
    rows = {i for i in range(len(means)) if finite[i] and np.isclose(score[i], best)}
    return set() if len(rows) == finite.sum() else rows


def _stat_cell(row: pd.Series, column: str, cells: int, bold: bool) -> Inline:
    n = int(row.get(f"{column}:n", 0) or 0)
    if n == 0:
        return ""
    text = fmt.mean_se(row[f"{column}:mean"], row[f"{column}:se"])
    if n < cells:
        text += f" (n={n})"
    return Strong(text) if bold else text


def _noted_groups(results: SuiteResults, dataset: str | None = None) -> dict[tuple, list[str]]:
    """Budget notes per (method, backend) (of one dataset, or all)."""
    cells = results.cells
    if "budget_note" not in cells or cells.empty:
        return {}
    sub = cells if dataset is None else cells[cells["dataset"] == dataset]
    notes: dict[tuple, list[str]] = {}
    for _, row in sub[sub["budget_note"].notna()].iterrows():
        key = (row["method"], row["backend"])
        if row["budget_note"] not in notes.setdefault(key, []):
            notes[key].append(row["budget_note"])
    return notes


def metric_table(
    results: SuiteResults,
    dataset: str,
    columns: Sequence[str],
    caption: str,
    methods: Sequence[str] | None = None,
) -> Table | None:
    """Mean ± standard error over splits and seeds of ``columns`` per (method, backend).

    Every (method, backend) of the dataset gets a row, including ones whose cells all failed;
    ``cells`` counts the statuses and ``n`` the cells whose metrics enter the means.
    """
    cells = results.cells[results.cells["dataset"] == dataset]
    if methods is not None:
        cells = cells[cells["method"].isin(methods)]
    cols = _present(cells, columns)
    if cells.empty or not cols:
        return None
    stats = group_stats(cells, cols)
    counts = status_counts(cells)
    merged = counts.merge(stats, on=["dataset", "method", "backend"], how="left")
    merged = sort_groups(merged).reset_index(drop=True)
    notes = _noted_groups(results, dataset)
    best = {c: _best_rows(merged, c) for c in cols}
    rows, classes = [], []
    for i, row in merged.iterrows():
        used = 0 if pd.isna(row.get("cells")) else int(row["cells"])
        backend = row["backend"] + (
            f" {BUDGET_MARK}" if (row["method"], row["backend"]) in notes else ""
        )
        cells_row: list[Inline] = [row["method"], backend, row["status_text"], str(used)]
        cells_row += [_stat_cell(row, c, used, i in best[c]) if used else "" for c in cols]
        rows.append(tuple(cells_row))
        problem = any(row.get(s, 0) for s in PROBLEM_STATUSES)
        classes.append("problem" if problem else "")
    header = ("method", "backend", "cells", "n", *(label(c) for c in cols))
    numeric = (False, False, False, True, *(True for _ in cols))
    return Table(header, tuple(rows), caption, tuple(classes), numeric)


def dataset_table(results: SuiteResults, dataset: str) -> Table | None:
    """The main per-dataset table: quality metrics and fit times."""
    task = task_of(results, dataset)
    main = CLASSIFICATION_MAIN if task == "classification" else REGRESSION_MAIN
    caption = (
        "Mean ± standard error over splits and seeds (standard error blank when n = 1); "
        "best value per column in bold; cells: statuses of the (method, backend)'s cells; "
        "n: cells whose metrics are averaged (ok and diverged; diverged cells keep their draws "
        "before divergence)."
    )
    return metric_table(results, dataset, [*main, *TIMES_MAIN], caption)


def cost_table(results: SuiteResults, dataset: str) -> Table | None:
    """Time split by phase and cost per step, gradient and effective sample."""
    columns = [
        "time_total",
        "time_compile",
        "time_warmup",
        "time_sampling",
        "time_predict",
        "time_cell_wall",
        *COST_METRICS,
    ]
    caption = (
        "Where the time goes (seconds, mean ± SE): compile/trace, warmup or optimisation, "
        "sampling and prediction, and cost per step, per gradient and per effective sample."
    )
    return metric_table(results, dataset, columns, caption)


def sampler_table(results: SuiteResults, dataset: str) -> Table | None:
    """Convergence diagnostics of the (SG-)MCMC methods."""
    caption = (
        "MCMC and SG-MCMC diagnostics on test predictions (R-hat, ESS) and sampler statistics, "
        "mean ± SE over splits and seeds. R-hat near 1 and large ESS are needed for trustworthy "
        "predictive uncertainty."
    )
    return metric_table(results, dataset, SAMPLER_METRICS, caption, methods=SAMPLERS)


def task_of(results: SuiteResults, dataset: str) -> str | None:
    """``"regression"`` or ``"classification"`` (None when no cell of it has metrics)."""
    tasks = results.cells.loc[results.cells["dataset"] == dataset, "task"].dropna()
    return None if tasks.empty else str(tasks.iloc[0])


def budget_notes(results: SuiteResults, dataset: str) -> Paragraph | None:
    """Footnote under a dataset's table: which budgets were reduced and why."""
    notes = _noted_groups(results, dataset)
    if not notes:
        return None
    parts: list[Inline] = [f"{BUDGET_MARK} Reduced budget. "]
    for (method, backend), texts in sorted(notes.items(), key=lambda kv: method_key(kv[0][0])):
        diff = _option_diff(results, dataset, method, backend)
        parts.append(Strong(f"{method} on {backend}: "))
        parts.append("; ".join(texts) + (f" ({diff})" if diff else "") + ". ")
    return Paragraph(tuple(parts))


def _options(results: SuiteResults, cell_id: str) -> dict[str, Any]:
    return dict((results.record(cell_id).get("config") or {}).get("options") or {})


def _option_diff(results: SuiteResults, dataset: str | None, method: str, backend: str) -> str:
    """How the noted cells' options differ from the same method on the other backends."""
    cells = results.cells
    sub = cells if dataset is None else cells[cells["dataset"] == dataset]
    mine = sub[(sub["method"] == method) & (sub["backend"] == backend)]
    others = sub[(sub["method"] == method) & (sub["backend"] != backend)]
    if mine.empty:
        return ""
    opts = _options(results, mine.iloc[0]["cell_id"])
    if others.empty:
        return ", ".join(f"{k}={_show(v)}" for k, v in sorted(opts.items()))
    other = others.iloc[0]
    theirs = _options(results, other["cell_id"])
    diffs = [
        f"{k}={_show(opts.get(k))} vs {_show(theirs.get(k))} on {other['backend']}"
        for k in sorted(set(opts) | set(theirs))
        if opts.get(k) != theirs.get(k)
    ]
    return "; ".join(diffs) if diffs else f"same options as on {other['backend']}"


def _show(value: Any) -> str:
    if value is None:
        return "default"
    return value if isinstance(value, str) else json.dumps(value)


def budget_table(results: SuiteResults) -> Table | None:
    """Every reduced budget in the suite: where, how it differs, and the stated reason."""
    cells = results.cells
    if cells.empty or "budget_note" not in cells or cells["budget_note"].isna().all():
        return None
    noted = cells[cells["budget_note"].notna()]
    rows = []
    for (dataset, method, backend, note), group in noted.groupby(
        ["dataset", "method", "backend", "budget_note"], sort=False
    ):
        diff = _option_diff(results, dataset, method, backend)
        rows.append((dataset, method, backend, str(len(group)), diff, note))
    rows.sort(key=lambda r: (r[0], method_key(r[1]), backend_key(r[2])))
    caption = (
        "Cells run with a reduced budget: the options that differ from the same method on the "
        "other backend (from the stored configs), and the reason given in the suite."
    )
    header = ("dataset", "method", "backend", "cells", "budget (this vs other backend)", "reason")
    return Table(header, tuple(rows), caption, (), (False, False, False, True, False, False))


def problems(results: SuiteResults, dataset: str) -> tuple[Table | None, list[Details]]:
    """Cells of ``dataset`` that failed, timed out or diverged, and their tracebacks."""
    cells = results.cells
    bad = cells[(cells["dataset"] == dataset) & cells["status"].isin(PROBLEM_STATUSES)]
    if bad.empty:
        return None, []
    rows, details = [], []
    for _, row in sort_groups(bad).iterrows():
        record = results.record(row["cell_id"])
        error = record.get("error") or {}
        error_type = _text(row["error_type"])
        message = _text(row["error_message"]) or _divergence_text(record)
        rows.append(
            (
                row["method"],
                row["backend"],
                str(row["split"]),
                str(row["seed"]),
                row["status"],
                error_type,
                message,
            )
        )
        if error.get("traceback"):
            summary = f"{row['cell_id']}: {row['status']}, {error_type or 'error'}"
            details.append(Details(summary, str(error["traceback"])))
    caption = (
        "Cells that did not finish cleanly: status and the first line of the error (full "
        "tracebacks below). Failed and timed-out cells have no metrics."
    )
    header = ("method", "backend", "split", "seed", "status", "error", "message")
    numeric = (False, False, True, True, False, False, False)
    return Table(header, tuple(rows), caption, tuple("problem" for _ in rows), numeric), details


def _text(value: Any) -> str:
    """A cell's text; "" for None and NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _divergence_text(record: dict[str, Any]) -> str:
    info = record.get("info") or {}
    steps = info.get("diverged_at_step")
    if isinstance(steps, list):
        steps = [s for s in steps if s is not None]
    if steps:
        return f"diverged at step {steps}"
    return "diverged" if record.get("status") == "diverged" else ""


def published_table(results: SuiteResults, dataset: str) -> Table | None:
    """Our test RMSE / log-likelihood beside published figures for a UCI dataset."""
    refs = references_for(dataset)
    if not refs:
        return None
    cells = results.cells[results.cells["dataset"] == dataset]
    cols = _present(cells, ["test_ll", "rmse"])
    rows: list[tuple[Inline, ...]] = []
    classes = []
    if cols:
        stats = group_stats(cells, cols)
        for _, row in stats.iterrows():
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
                        _stat_cell(row, c, int(row["cells"]), False)
                        for c in ("test_ll", "rmse")
                        if c in cols
                    ),
                )
            )
            classes.append("")
    shown = cols or ["test_ll", "rmse"]
    for ref in refs:
        values = {"test_ll": fmt.number(ref.test_ll, 3), "rmse": fmt.number(ref.rmse, 3)}
        source = Link(ref.source.label, ref.source.url)
        splits, hidden = _published_setup(ref.dataset)
        rows.append((ref.method, source, splits, hidden, *(values[c] for c in shown)))
        classes.append("published")
    header = ("method", "source", "splits", "hidden units", *(label(c) for c in shown))
    caption = (
        "Ours (mean ± SE over the splits run here) beside published figures (test log-likelihood "
        "and RMSE in original units, mean over the standard splits). Published numbers are typed "
        "in from their sources, not computed here; they are comparable only for the same splits "
        "and architecture."
    )
    numeric = (False, False, True, False, *(True for _ in shown))
    return Table(header, tuple(rows), caption, tuple(classes), numeric)


def _published_setup(uci_dataset: str) -> tuple[str, str]:
    """Splits and hidden units behind the published figures (protein: 5 splits, 100 units)."""
    return ("5", "100") if uci_dataset.startswith("protein") else ("20", "50")


def _hidden(results: SuiteResults, cell_id: str) -> str:
    model = (results.record(cell_id).get("config") or {}).get("model") or {}
    hidden = model.get("hidden")
    if hidden is None:
        return ""
    return " \u00d7 ".join(str(h) for h in hidden) if isinstance(hidden, list) else str(hidden)


def backends_table(results: SuiteResults) -> Table | None:
    """The same method on Pyro and NumPyro: quality side by side and cost ratios."""
    cells = results.cells
    if cells.empty:
        return None
    quality = ["test_ll", "nll", "rmse", "accuracy"]
    costs = ["s_per_grad", "s_per_step", "time_total", "ess_per_s"]
    pairs = backend_pairs(cells, quality, costs)
    if pairs.empty:
        return None
    q_cols = [c for c in quality if f"{c}:pyro" in pairs and pairs[f"{c}:pyro"].notna().any()]
    c_cols = [c for c in costs if f"{c}:ratio" in pairs and pairs[f"{c}:ratio"].notna().any()]
    rows = []
    for _, row in pairs.iterrows():
        cells_row: list[Inline] = [row["dataset"], row["method"], str(row["pairs"])]
        for col in q_cols:
            cells_row += [fmt.number(row[f"{col}:pyro"]), fmt.number(row[f"{col}:numpyro"])]
        cells_row += [fmt.ratio(row[f"{col}:ratio"]) for col in c_cols]
        rows.append(tuple(cells_row))
    header = ["dataset", "method", "pairs"]
    for col in q_cols:
        header += [f"{label(col)} pyro", f"{label(col)} numpyro"]
    header += [f"{label(col)} pyro/numpyro" for col in c_cols]
    caption = (
        "The same method on both backends, paired on (dataset, split, seed): mean quality per "
        "backend, and cost ratios pyro/numpyro (geometric mean over pairs; > 1 means Pyro is "
        "slower, except ESS/s where > 1 means Pyro is more efficient)."
    )
    numeric = (False, False, True, *(True for _ in header[3:]))
    return Table(tuple(header), tuple(rows), caption, (), numeric)


def reference_table(
    distances: pd.DataFrame, reference: tuple[str, str], dataset: str
) -> Table | None:
    """Mean ± SE over (split, seed) of one dataset's distances to the reference posterior."""
    sub = distances[distances["dataset"] == dataset] if not distances.empty else distances
    cols = _present(sub, ["w2", "ks", "agreement", "total_variation"])
    if sub.empty or not cols:
        return None
    stats = group_stats(sub.assign(status="ok"), cols)
    best = {c: _best_rows(stats, c) for c in cols}
    rows = []
    for i, row in stats.iterrows():
        n = int(row["cells"])
        cells = (_stat_cell(row, c, n, i in best[c]) for c in cols)
        rows.append((row["method"], row["backend"], str(n), *cells))
    if "w2" in cols:
        what = (
            f"W2 and KS distances between the predictive marginals, mean over {_points_text(sub)}"
        )
    else:
        what = "agreement of the most probable class and total variation, mean over test points"
    caption = (
        f"Against the reference posterior ({'.'.join(reference)}) on the same split and seed, "
        f"from the stored predictive draws (Izmailov et al. 2021): {what}. Mean ± SE over "
        "splits and seeds; best in bold."
    )
    header = ("method", "backend", "n", *(label(c) for c in cols))
    return Table(header, tuple(rows), caption, (), (False, False, True, *(True,) * len(cols)))


def _points_text(distances: pd.DataFrame) -> str:
    regression = distances[distances["w2"].notna()] if "w2" in distances else distances.iloc[:0]
    if regression.empty:
        return "test points"
    most = int(regression["points"].max())
    return (
        f"up to {most} evenly spaced test points" if most >= MAX_REFERENCE_POINTS else "test points"
    )


def loo_table(compare: pd.DataFrame, dataset: str) -> tuple[Table | None, Details | None]:
    """PSIS-LOO comparison per backend and method, averaged over (split, seed), with every
    ``az.compare`` table in a collapsible block."""
    sub = compare[compare["dataset"] == dataset] if not compare.empty else compare
    if sub.empty:
        return None, None
    rows = []
    for (backend, method), group in sorted(
        sub.groupby(["backend", "method"]),
        key=lambda kv: (backend_key(kv[0][0]), method_key(kv[0][1])),
    ):
        n = len(group)
        elpd = group["elpd_loo"].to_numpy(float)
        se = elpd.std(ddof=1) / math.sqrt(n) if n > 1 else math.nan
        rows.append(
            (
                backend,
                method,
                str(n),
                fmt.number(group["rank"].mean(), 2),
                fmt.mean_se(elpd.mean(), se),
                fmt.number(group["p_loo"].mean()),
                fmt.number(group["elpd_diff"].mean()),
                fmt.number(group["weight"].mean(), 2),
                fmt.number(100 * group["pareto_k_bad"].mean(), 2),
            )
        )
    header = (
        "backend",
        "method",
        "groups",
        "mean rank",
        "elpd_loo",
        "p_loo",
        "elpd diff",
        "stacking weight",
        "% Pareto k > 0.7",
    )
    caption = (
        "PSIS-LOO (az.compare on the stored training log-likelihood) across the methods fitted "
        "to the same (split, seed, backend), averaged over those groups: rank 0 is best; "
        "elpd_loo ± SE over groups; high Pareto k (> 0.7) makes the estimate unreliable, as it "
        "often is for BNNs and for methods with few distinct draws."
    )
    numeric = (False, False, True, True, True, True, True, True, True)
    table = Table(header, tuple(rows), caption, (), numeric)
    shown = sub[
        [
            "split",
            "seed",
            "backend",
            "method",
            "rank",
            "elpd_loo",
            "p_loo",
            "elpd_diff",
            "weight",
            "se",
            "dse",
            "warning",
        ]
    ].copy()
    with pd.option_context("display.width", 200, "display.max_rows", None):
        text = shown.to_string(index=False, float_format=lambda v: fmt.number(v, 4))
    return table, Details("Every az.compare table (one per split, seed and backend)", text)


def weight_diagnostics_table(frame: pd.DataFrame, halved: bool, cell_id: str) -> Table | None:
    """The ``az.summary`` of a few weights, labelled as uninformative about convergence."""
    if frame.empty:
        return None
    cols = [c for c in frame.columns if c != "weight"]
    rows = tuple(
        (row["weight"], *(fmt.number(row[c], 3) for c in cols)) for _, row in frame.iterrows()
    )
    caption = (
        f"az.summary of a few weights of {cell_id}. Weight R-hat and ESS are uninformative "
        "about convergence: BNN weights are non-identifiable (hidden units can be permuted and "
        "their signs flipped, label-switching), so chains may disagree on weights while agreeing "
        "on predictions. Judge convergence by the prediction R-hat/ESS in the table above."
    )
    if halved:
        caption += " The run has one chain: R-hat compares its two halves."
    header = ("weight", *(c.replace("_", " ") for c in cols))
    return Table(header, rows, caption, (), (False, *(True,) * len(cols)))


def pruning_table(results: SuiteResults, dataset: str) -> Table | None:
    """Test quality against the share of weights pruned by |mu|/sigma (Blundell et al. 2015)."""
    cells = results.cells[results.cells["dataset"] == dataset]
    curves: dict[tuple[str, str], list[dict]] = {}
    for _, row in cells[cells["status"].isin(("ok", "diverged"))].iterrows():
        curve = (results.record(row["cell_id"]).get("curves") or {}).get("pruning")
        if curve and curve.get("fraction"):
            curves.setdefault((row["method"], row["backend"]), []).append(curve)
    if not curves:
        return None
    fractions = list(next(iter(curves.values()))[0]["fraction"])
    rows = []
    for (method, backend), group in sorted(
        curves.items(), key=lambda kv: (method_key(kv[0][0]), backend_key(kv[0][1]))
    ):
        for key in ("test_ll", "rmse", "accuracy"):
            series = [c[key] for c in group if key in c and list(c["fraction"]) == fractions]
            if not series:
                continue
            values = np.array([[np.nan if v is None else v for v in s] for s in series], float)
            means = np.nanmean(values, axis=0) if np.isfinite(values).any() else values[0]
            rows.append((method, backend, label(key), *(fmt.number(v) for v in means)))
    header = ("method", "backend", "metric", *(f"{fmt.number(100 * f)}% pruned" for f in fractions))
    caption = (
        "Weight pruning by signal-to-noise |mu|/sigma (Blundell et al. 2015, Table 2): test "
        "quality after zeroing the given share of weights with the lowest ratio (mean over splits)."
    )
    return Table(header, tuple(rows), caption, (), (False, False, False, *(True,) * len(fractions)))


def key_value_table(items: dict[str, Any], caption: str) -> Table | None:
    """A two-column table of names and values (nested values as JSON)."""
    if not items:
        return None
    rows = tuple(
        (str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True))
        for k, v in items.items()
    )
    return Table(("name", "value"), rows, caption, (), (False, False))
