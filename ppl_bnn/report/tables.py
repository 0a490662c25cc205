"""Report tables: stored results and the frames of :mod:`.stats` formatted as document tables."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.bench.cell import base_method
from ppl_bnn.report import fmt
from ppl_bnn.report.document import Details, Inline, Paragraph, Strong, Table
from ppl_bnn.report.fidelity import FLOOR_DISTANCES, FLOOR_RATIO
from ppl_bnn.report.fmt import first_line
from ppl_bnn.report.glossary import (
    CLASSIFICATION_FIDELITY,
    CLASSIFICATION_MAIN,
    COST_METRICS,
    REGION_MAIN,
    REGRESSION_FIDELITY,
    REGRESSION_FIDELITY_ALL,
    REGRESSION_MAIN,
    SAMPLER_METRICS,
    TIMES_MAIN,
    label,
)
from ppl_bnn.report.load import SAMPLERS, SuiteResults, backend_key, method_key
from ppl_bnn.report.ranking import Ranking, critical_value, eligible_groups, flagged, rank
from ppl_bnn.report.reference_entries import (
    references_pass,
)
from ppl_bnn.report.reference_tables import reference_caption, unranked_caption
from ppl_bnn.report.stats import (
    PROBLEM_STATUSES,
    WITH_METRICS,
    group_stats,
    sort_groups,
    status_counts,
)

BUDGET_MARK = "†"
TIE_MARK = "≈"
FLAG_MARK = "⚠"
UNUSABLE_NOTE = (
    f"{FLAG_MARK} unusable: a predictive worse than a constant fitted to the training targets "
    f"(on the test set, on its inside part where it has parts, or on the training set)"
)
RANKING_NOTE = (
    f"Bold: best, its lead over the runner-up more than noise by a paired t-test over "
    f"splits and seeds at the 5% level (more than {critical_value(3):.1f} standard errors with "
    f"3 replicates, {critical_value(20):.1f} with 20); {TIE_MARK}: tied for best (no clear "
    f"winner). Ranked only among (method, backend) pairs whose every cell finished ok at the "
    f"full budget; {UNUSABLE_NOTE}, never ranked."
)


def present(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns of ``frame`` that hold at least one finite value."""
    return [c for c in columns if c in frame.columns and np.isfinite(frame[c].astype(float)).any()]


def _marks(cells: pd.DataFrame, columns: Sequence[str]) -> dict[str, Ranking]:
    """The ranking of each column among the dataset's eligible groups (see :mod:`.ranking`)."""
    eligible = eligible_groups(cells)
    out = {}
    for column in columns:
        verdict = rank(cells, column, eligible)
        if verdict is not None:
            out[column] = verdict
    return out


def _mark(verdict: Ranking | None, group: tuple[str, str], eligible_count: int) -> str:
    """``"best"``, ``"tie"`` (tied for best, unless every ranked group is) or ``""``."""
    if verdict is None:
        return ""
    if verdict.best == group:
        return "best"
    if group in verdict.tied and len(verdict.tied) < eligible_count:
        return "tie"
    return ""


def stat_cell(row: pd.Series, column: str, cells: int, mark: str) -> Inline:
    n = int(row.get(f"{column}:n", 0) or 0)
    if n == 0:
        return ""
    text = fmt.mean_se(row[f"{column}:mean"], row[f"{column}:se"])
    notes = [f"n={n}"] if n < cells else []
    if column in FLOOR_DISTANCES and (floor := fmt.against_floor(row.get(f"{FLOOR_RATIO}:mean"))):
        # The distance the reference's floor is measured in: its mean ratio to the floor.
        notes.append(floor)
    if notes:
        text += f" ({'; '.join(notes)})"
    if mark == "tie":
        return f"{text} {TIE_MARK}"
    return Strong(text) if mark == "best" else text


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
    ranked: bool = True,
) -> Table | None:
    """Mean ± standard error over splits and seeds of ``columns`` per (method, backend).

    Every (method, backend) of the dataset gets a row, including ones whose cells all failed;
    ``cells`` counts the statuses (and flagged cells) and ``n`` the cells whose metrics enter the
    means. Values are marked best or tied for best by :func:`~ppl_bnn.report.ranking.rank`,
    unless ``ranked`` is false (distances to a reference that failed its gate). A column with
    no value in a cell with metrics is left out; None when none is left (every cell failed).
    """
    cells = results.cells[results.cells["dataset"] == dataset]
    if methods is not None:
        cells = cells[cells["method"].map(base_method).isin(methods)]
    # Only cells with metrics enter the means: a column of failed cells' values alone is blank.
    cols = present(cells[cells["status"].isin(WITH_METRICS)], columns)
    if cells.empty or not cols:
        return None
    floors = [FLOOR_RATIO] if set(cols) & set(FLOOR_DISTANCES) else []
    stats = group_stats(cells, [*cols, *floors])
    counts = status_counts(cells)
    merged = counts.merge(stats, on=["dataset", "method", "backend"], how="left")
    merged = sort_groups(merged).reset_index(drop=True)
    notes = _noted_groups(results, dataset)
    marks = _marks(cells, cols) if ranked else {}
    eligible = len(eligible_groups(cells))
    flags = flagged(cells).groupby([cells["method"], cells["backend"]]).sum()
    rows, classes = [], []
    for _, row in merged.iterrows():
        group = (row["method"], row["backend"])
        used = 0 if pd.isna(row.get("cells")) else int(row["cells"])
        backend = row["backend"] + (f" {BUDGET_MARK}" if group in notes else "")
        status = row["status_text"]
        if flags.get(group, 0):
            status += f", {int(flags[group])} {FLAG_MARK} unusable"
        cells_row: list[Inline] = [row["method"], backend, status, str(used)]
        cells_row += [
            stat_cell(row, c, used, _mark(marks.get(c), group, eligible)) if used else ""
            for c in cols
        ]
        rows.append(tuple(cells_row))
        problem = any(row.get(s, 0) for s in PROBLEM_STATUSES) or flags.get(group, 0)
        classes.append("problem" if problem else "")
    header = ("method", "backend", "cells", "n", *(label(c) for c in cols))
    numeric = (False, False, False, True, *(True for _ in cols))
    note = RANKING_NOTE if ranked else f"{UNUSABLE_NOTE}."
    return Table(header, tuple(rows), f"{caption} {note}", tuple(classes), numeric)


def dataset_table(results: SuiteResults, dataset: str) -> Table | None:
    """The main per-dataset table: fidelity to the reference (only where the dataset's
    references have a floor: :func:`~ppl_bnn.report.reference_entries.references_pass`; W2 or
    TV with its ratio to the floor), quality metrics and fit times, ranked.

    A test set that reaches where no training input lies is scored on each part apart, never
    as a whole: a fit that ignores the inputs could otherwise look good where most test points
    lie far from the data.
    """
    task = task_of(results, dataset)
    regression = task != "classification"
    main = REGRESSION_MAIN if regression else CLASSIFICATION_MAIN
    fidelity: tuple[str, ...] = ()
    if references_pass(results.references_of(dataset)):
        fidelity = REGRESSION_FIDELITY if regression else CLASSIFICATION_FIDELITY
    regions = results.regions(dataset)
    parts = ""
    if regions:
        main = (
            *(f"{m}_{part}" for m in REGION_MAIN for part in ("in", "out")),
            "epistemic_std_ratio",
        )
        if fidelity:
            fidelity = (*fidelity, "ref_std_ratio_in", "ref_std_ratio_out")
        parts = (
            f" The test set is scored in two parts: {regions['in']} (_in) and {regions['out']} "
            "(_out)."
        )
    caption = (
        "Mean ± standard error over splits and seeds (standard error blank when n = 1); "
        "cells: statuses of the (method, backend)'s cells; n: cells whose metrics are averaged "
        "(ok and diverged; diverged cells keep their draws before divergence)."
        + parts
        + reference_caption(results, dataset)
    )
    return metric_table(results, dataset, [*fidelity, *main, *TIMES_MAIN], caption)


def cost_table(results: SuiteResults, dataset: str) -> Table | None:
    """Time split by phase and cost per step, gradient and effective sample."""
    columns = [
        "time_total",
        "time_compile",
        "time_warmup",
        "time_sampling",
        "time_predict",
        "time_cell_wall",
        "time_tuning",
        *COST_METRICS,
    ]
    caption = (
        "Where the time goes (seconds, mean ± SE): compile/trace, warmup or optimisation, "
        "sampling and prediction, choosing a tuned contestant's settings (apart from its fit), "
        "and cost per step, per gradient and per effective sample."
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


#: The status column of a cell whose complete result stayed in place when a rerun failed.
RERUN_FAILED = "rerun failed"


def problems(results: SuiteResults, dataset: str) -> tuple[Table | None, list[Details]]:
    """Cells of ``dataset`` that failed, timed out or diverged, or whose rerun failed (their
    earlier result kept), and their tracebacks."""
    cells = results.cells
    mine = cells["dataset"] == dataset
    bad = cells[mine & (cells["status"].isin(PROBLEM_STATUSES) | cells["cell_id"].isin(
        results.attempts))]  # fmt: skip
    if bad.empty:
        return None, []
    rows, details = [], []
    for _, row in sort_groups(bad).iterrows():
        record = results.record(row["cell_id"])
        status = str(row["status"])
        error = record.get("error") or {}
        error_type = _text(row["error_type"])
        message = _text(row["error_message"]) or _divergence_text(record)
        if row["cell_id"] in results.attempts:
            attempt = results.attempts[row["cell_id"]][-1]
            error = attempt.get("error") or {}
            status = f"{status}, {RERUN_FAILED}"
            error_type = str(error.get("type") or attempt.get("status") or "")
            message = (
                f"a rerun on {attempt.get('finished_at')} ended {attempt.get('status')}: "
                f"{first_line(error.get('message'))} (the earlier {row['status']} result, "
                "shown everywhere, is kept)"
            )
        rows.append(
            (row["method"], row["backend"], str(row["split"]), str(row["seed"]), status,
             error_type, message)
        )  # fmt: skip
        if error.get("traceback"):
            summary = f"{row['cell_id']}: {status}, {error_type or 'error'}"
            details.append(Details(summary, str(error["traceback"])))
    caption = (
        "Cells that did not finish cleanly: status and the first line of the error (full "
        f'tracebacks below). Failed and timed-out cells have no metrics; a "{RERUN_FAILED}" '
        "cell keeps the result of its earlier run, which a later rerun failed to replace."
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


def fidelity_table(results: SuiteResults, dataset: str) -> Table | None:
    """Every fidelity column of ``dataset`` (including per region; W2 or TV with its ratio to
    the floor): ranked where the dataset's references have a floor
    (:func:`~ppl_bnn.report.reference_entries.references_pass`), else shown unranked under a
    caption that says so."""
    columns = [*REGRESSION_FIDELITY_ALL, *CLASSIFICATION_FIDELITY]
    if references_pass(results.references_of(dataset)):
        caption = "Against the reference posterior of each split." + reference_caption(
            results, dataset
        )
        return metric_table(results, dataset, columns, caption)
    return metric_table(results, dataset, columns, unranked_caption(results, dataset), ranked=False)


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


def training_table(results: SuiteResults, dataset: str) -> Table | None:
    """The ELBO split at the last checkpoint of svi's training curve (``curves["training"]``),
    mean over splits and seeds: expected log-likelihood, KL, beta and the ELBO they make."""
    cells = results.cells[results.cells["dataset"] == dataset]
    finals: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _, row in cells[cells["status"].isin(("ok", "diverged"))].iterrows():
        curve = (results.record(row["cell_id"]).get("curves") or {}).get("training")
        if not curve or not curve.get("step"):
            continue
        last = {
            k: curve[k][-1] for k in ("step", "expected_log_lik", "kl", "held_out_ll") if k in curve
        }
        last["kl_weight"] = curve.get("kl_weight", 1.0)
        finals.setdefault((row["method"], row["backend"]), []).append(last)
    if not finals:
        return None

    def mean(group: list[dict[str, float]], key: str) -> float:
        values = [np.nan if g.get(key) is None else g[key] for g in group]
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    rows = []
    for (method, backend), group in sorted(
        finals.items(), key=lambda kv: (method_key(kv[0][0]), backend_key(kv[0][1]))
    ):
        ell, kl, beta = (mean(group, k) for k in ("expected_log_lik", "kl", "kl_weight"))
        rows.append(
            (
                method,
                backend,
                fmt.number(mean(group, "step")),
                fmt.number(ell),
                fmt.number(kl),
                fmt.number(beta),
                fmt.number(ell - beta * kl),
                fmt.number(mean(group, "held_out_ll")),
            )
        )
    header = ("method", "backend", "step", "E_q[log lik]", "KL", "β", "ELBO", "held-out LL")
    caption = (
        "The ELBO split into its two parts at the last checkpoint of training, mean over splits "
        "and seeds: E_q[log p(y | θ)] on all training points and KL(q || p), each the mean of "
        "the per-step estimates since the previous checkpoint (nats, the model's standardised "
        "units), the KL weight β and ELBO = E_q[log p(y | θ)] - β KL. Held-out LL: mean log "
        "predictive density per test point (original units; test data shown for display only)."
    )
    return Table(header, tuple(rows), caption, (), (False, False, *(True,) * 6))


def key_value_table(items: dict[str, Any], caption: str) -> Table | None:
    """A two-column table of names and values (nested values as JSON)."""
    if not items:
        return None
    rows = tuple(
        (str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True))
        for k, v in items.items()
    )
    return Table(("name", "value"), rows, caption, (), (False, False))
