"""Figures drawn from stored results, returned as PNG bytes (matplotlib, no pyplot state).

Each function returns a :class:`~ppl_bnn.report.document.Figure`, or None when the suite has no
data for it. Figures are built on ``matplotlib.figure.Figure`` objects, never registered with
pyplot, so nothing stays open after rendering, and saved to PNG by matplotlib's own Agg canvas:
the user's backend (a notebook's inline one) is never chosen or changed here.
"""

from __future__ import annotations

import io
import logging
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ppl_bnn.files import import_arviz
from ppl_bnn.report import fmt
from ppl_bnn.report.document import Figure, slug
from ppl_bnn.report.load import (
    SuiteResults,
    backend_key,
    method_key,
)
from ppl_bnn.report.published_figures import published_pruning_for
from ppl_bnn.report.stats import (
    WITH_METRICS,
    group_stats,
    halves_if_single_chain,
    weight_moments,
    weight_summary,
)
from ppl_bnn.report.style import backend_linestyle, backend_marker, method_color

logger = logging.getLogger(__name__)

DPI = 100
PANEL = (2.9, 2.2)  # inches per small panel
MAX_PANELS = 24


def _png(fig: MplFigure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    fig.clear()
    return buffer.getvalue()


def plain_log_ticks(axis: Any) -> None:
    """Label a log axis's major ticks as plain numbers and hide minor tick labels."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.number(v, 2)))
    axis.set_minor_formatter(NullFormatter())


def figure_of(dataset: str, kind: str, fig: MplFigure, caption: str) -> Figure:
    return Figure(name=slug(dataset, kind), png=_png(fig), caption=caption)


def _grid(n: int, ncols: int = 4, panel: tuple[float, float] = PANEL, **kw: Any) -> tuple:
    """A figure with ``n`` panels on a grid; unused panels are hidden."""
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig = MplFigure(figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False, **kw)).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[max(0, n - ncols) : n]:
        # The lowest panel of each column keeps its tick labels, also above a hidden panel.
        ax.xaxis.set_tick_params(labelbottom=True)
    return fig, axes[:n]


def _groups(results: SuiteResults, dataset: str, statuses: Sequence[str] = WITH_METRICS):
    """Cells of ``dataset`` per (method, backend) in canonical order, with a usable status."""
    cells = results.cells
    sub = cells[(cells["dataset"] == dataset) & cells["status"].isin(statuses)]
    keys = sorted(
        {(m, b) for m, b in zip(sub["method"], sub["backend"], strict=True)},
        key=lambda k: (method_key(k[0]), backend_key(k[1])),
    )
    return [(m, b, sub[(sub["method"] == m) & (sub["backend"] == b)]) for m, b in keys]


def _first_with(
    results: SuiteResults, group: pd.DataFrame, variables: Sequence[str]
) -> tuple[pd.Series, Any] | None:
    """The group's first cell (ok before diverged) whose predictions hold ``variables``."""
    ordered = group.assign(_bad=group["status"] != "ok").sort_values(["_bad", "split", "seed"])
    for _, row in ordered.iterrows():
        pred = results.predictions(row["cell_id"])
        if pred is not None and all(v in pred for v in variables):
            return row, pred
    return None


def _title(method: str, backend: str, row: pd.Series | None = None) -> str:
    text = f"{method} · {backend}"
    if row is not None and row["status"] != "ok":
        text += f" ({row['status']})"
    return text


def legend_methods_backends(fig: MplFigure, methods: Sequence[str], backends: Sequence[str]):
    handles = [Line2D([], [], color=method_color(m), lw=2, label=m) for m in methods]
    handles += [
        Line2D([], [], color="0.3", marker=backend_marker(b), ls=backend_linestyle(b), label=b)
        for b in backends
    ]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)


def fits_1d(results: SuiteResults, dataset: str) -> Figure | None:
    """Predictive mean with ±2 std bands (total and epistemic) per (method, backend) on a 1-D set,
    over the training points; the reference posterior's bands dashed where there is one."""
    panels = []
    for method, backend, group in _groups(results, dataset):
        found = _first_with(results, group, ("grid_x", "grid_mean", "grid_std"))
        if found is not None:
            panels.append((method, backend, *found))
    if not panels:
        return None
    panels = panels[:MAX_PANELS]
    ref = _reference_grid(results, panels[0][2])
    fig, axes = _grid(len(panels), sharex=True, sharey=True)
    lows, highs = [], []
    for ax, (method, backend, row, pred) in zip(axes, panels, strict=True):
        x = pred["grid_x"]
        mean, std = pred["grid_mean"], pred["grid_std"]
        order = np.argsort(x)
        x, mean, std = x[order], mean[order], std[order]
        color = method_color(method)
        ax.fill_between(x, mean - 2 * std, mean + 2 * std, color=color, alpha=0.18, lw=0)
        if "grid_epistemic_std" in pred:
            epi = pred["grid_epistemic_std"][order]
            ax.fill_between(x, mean - 2 * epi, mean + 2 * epi, color=color, alpha=0.35, lw=0)
        ax.plot(x, mean, color=color, lw=1.5)
        if ref is not None:
            rx, rmean, rstd = ref
            ax.plot(rx, rmean - 2 * rstd, color="0.2", lw=0.8, ls="--")
            ax.plot(rx, rmean + 2 * rstd, color="0.2", lw=0.8, ls="--")
        if "train_x" in pred:
            ty = pred["train_y"]
            ax.scatter(pred["train_x"], ty, s=7, color="black", zorder=3, lw=0)
            lows.append(np.min(ty))
            highs.append(np.max(ty))
        ax.set_title(_title(method, backend, row), fontsize=9)
        ax.tick_params(labelsize=7)
    if lows:
        lo, hi = min(lows), max(highs)
        pad = 0.6 * (hi - lo if hi > lo else 1.0)
        axes[0].set_ylim(lo - pad, hi + pad)
    caption = (
        "Posterior predictive on a grid (first split and seed of each method and backend): "
        "mean (line), ±2 epistemic std (dark band), ±2 total std including noise (light band), "
        "training points (black)."
    )
    if ref is not None:
        caption += " Dashed: ±2 total std of the reference posterior (a chain ensemble)."
    return figure_of(dataset, "fits-1d", fig, caption)


def _reference_grid(results: SuiteResults, like: pd.Series):
    """Grid mean and total std of the reference posterior of ``like``'s (dataset, split)."""
    pred = results.reference_predictions(
        like["dataset"], like["split"], ("grid_x", "grid_mean", "grid_std")
    )
    if pred is None or "grid_x" not in pred:
        return None
    order = np.argsort(pred["grid_x"])
    return pred["grid_x"][order], pred["grid_mean"][order], pred["grid_std"][order]


def _pooled_curve(group: pd.DataFrame, results: SuiteResults, name: str) -> list[dict]:
    curves = []
    for cell_id in group["cell_id"]:
        curve = (results.record(cell_id).get("curves") or {}).get(name)
        if curve:
            curves.append(curve)
    return curves


def _mean_curve(curves: list[dict], x: str, y: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Mean of ``y`` over curves that share the first curve's ``x`` grid."""
    if not curves:
        return None
    base = np.asarray(curves[0][x], dtype=float)
    ys = [
        np.asarray([np.nan if v is None else v for v in c[y]], dtype=float)
        for c in curves
        if len(c.get(x, [])) == len(base) and np.allclose(np.asarray(c[x], dtype=float), base)
    ]
    with warnings.catch_warnings():
        # A column with no finite value stays NaN ("mean of empty slice").
        warnings.simplefilter("ignore", RuntimeWarning)
        return base, np.nanmean(np.vstack(ys), axis=0)


def calibration(results: SuiteResults, dataset: str) -> Figure | None:
    """Empirical against nominal coverage of central predictive intervals, one panel per
    backend, a line per method (mean over splits and seeds)."""
    lines: dict[str, list] = {}
    for method, backend, group in _groups(results, dataset):
        mean = _mean_curve(_pooled_curve(group, results, "coverage"), "nominal", "empirical")
        if mean is not None:
            lines.setdefault(backend, []).append((method, *mean))
    if not lines:
        return None
    backends = sorted(lines, key=backend_key)
    fig, axes = _grid(len(backends), ncols=len(backends), panel=(3.6, 3.4), sharey=True)
    for ax, backend in zip(axes, backends, strict=True):
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":")
        for method, nominal, empirical in lines[backend]:
            ax.plot(nominal, empirical, color=method_color(method), lw=1.5, label=method)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="nominal coverage", title=backend)
        ax.set_aspect("equal")
    axes[0].set_ylabel("empirical coverage")
    methods = sorted({m for v in lines.values() for m, *_ in v}, key=method_key)
    legend_methods_backends(fig, methods, [])
    caption = (
        "Calibration: share of test targets inside the central predictive interval against its "
        "nominal level (dotted diagonal = calibrated; below = overconfident), mean over splits."
    )
    return figure_of(dataset, "calibration", fig, caption)


def reliability(results: SuiteResults, dataset: str) -> Figure | None:
    """Reliability diagrams (accuracy per confidence bin, pooled over splits by bin counts)."""
    panels = []
    for method, backend, group in _groups(results, dataset):
        curves = _pooled_curve(group, results, "reliability")
        if not curves:
            continue
        lower = np.asarray(curves[0]["bin_lower"], dtype=float)
        upper = np.asarray(curves[0]["bin_upper"], dtype=float)
        count = np.zeros_like(lower)
        acc_sum = np.zeros_like(lower)
        for c in curves:
            if len(c["bin_lower"]) != len(lower):
                continue
            n = np.nan_to_num(np.asarray(c["count"], dtype=float))
            count += n
            acc_sum += n * np.nan_to_num(np.asarray(c["accuracy"], dtype=float))
        panels.append((method, backend, lower, upper, count, acc_sum))
    if not panels:
        return None
    panels = panels[:MAX_PANELS]
    fig, axes = _grid(len(panels), sharex=True, sharey=True, panel=(2.6, 2.5))
    for ax, (method, backend, lower, upper, count, acc_sum) in zip(axes, panels, strict=True):
        shown = count > 0
        acc = np.divide(acc_sum, count, out=np.zeros_like(count), where=shown)
        width = upper - lower
        ax.bar(
            lower[shown],
            acc[shown],
            width=width[shown],
            align="edge",
            color=method_color(method),
            alpha=0.75,
            edgecolor="white",
            lw=0.5,
        )
        ax.plot([0, 1], [0, 1], color="0.4", lw=1, ls=":")
        ax.set(xlim=(0, 1), ylim=(0, 1), title=f"{method} · {backend}")
        ax.title.set_fontsize(9)
        ax.tick_params(labelsize=7)
    for ax in axes[:: min(4, len(axes))]:
        ax.set_ylabel("accuracy", fontsize=8)
    for ax in axes[-min(4, len(axes)) :]:
        ax.set_xlabel("confidence", fontsize=8)
    caption = (
        "Reliability diagrams: accuracy of the test points in each confidence bin (bars) against "
        "the diagonal of perfect calibration; bins pooled over splits and seeds by their counts."
    )
    return figure_of(dataset, "reliability", fig, caption)


def refuse(results: SuiteResults, dataset: str) -> Figure | None:
    """Accuracy on the test points kept against the share kept when refusing below a
    confidence threshold."""
    lines = []
    for method, backend, group in _groups(results, dataset):
        curves = _pooled_curve(group, results, "refuse")
        # ppl_bnn.metrics.refuse_curve names it "fraction_kept"; "kept" is accepted too.
        key = "fraction_kept" if curves and "fraction_kept" in curves[0] else "kept"
        if not curves or key not in curves[0]:
            continue
        kept = _mean_curve(curves, "threshold", key)
        acc = _mean_curve(curves, "threshold", "accuracy")
        if kept is not None and acc is not None:
            lines.append((method, backend, kept[1], acc[1]))
    if not lines:
        return None
    fig = MplFigure(figsize=(5.6, 3.4), layout="constrained")
    ax = fig.subplots()
    for method, backend, kept, acc in lines:
        ax.plot(
            kept,
            acc,
            color=method_color(method),
            ls=backend_linestyle(backend),
            marker=backend_marker(backend),
            ms=3,
            lw=1.3,
        )
    ax.set(xlabel="share of test points kept", ylabel="accuracy on kept points")
    ax.invert_xaxis()
    legend_methods_backends(
        fig, sorted({m for m, *_ in lines}, key=method_key), sorted({b for _, b, *_ in lines})
    )
    caption = (
        "Refuse below a confidence threshold: accuracy on the points kept against the share kept "
        "(a model whose confidence ranks its errors well rises steeply to the right)."
    )
    return figure_of(dataset, "refuse", fig, caption)


def runtime_quality(results: SuiteResults, dataset: str) -> Figure | None:
    """Fit time (log scale) against test log-likelihood, mean ± SE per (method, backend)."""
    cells = results.cells[results.cells["dataset"] == dataset].copy()
    if cells.empty or "time_total" not in cells:
        return None
    if "test_ll" in cells and cells["test_ll"].notna().any():
        quality, ylabel = "test_ll", "test log-likelihood"
    elif "nll" in cells and cells["nll"].notna().any():
        cells["neg_nll"] = -cells["nll"]
        quality, ylabel = "neg_nll", "test log-likelihood (-NLL)"
    else:
        return None
    stats = group_stats(cells, ["time_total", quality])
    stats = stats[(stats["time_total:n"] > 0) & (stats[f"{quality}:n"] > 0)]
    stats = stats[stats["time_total:mean"] > 0]
    if stats.empty:
        return None
    fig = MplFigure(figsize=(6.2, 3.8), layout="constrained")
    ax = fig.subplots()
    for _, row in stats.iterrows():
        ax.errorbar(
            row["time_total:mean"],
            row[f"{quality}:mean"],
            xerr=np.nan_to_num(row["time_total:se"]),
            yerr=np.nan_to_num(row[f"{quality}:se"]),
            color=method_color(row["method"]),
            marker=backend_marker(row["backend"]),
            ms=7,
            lw=1,
            capsize=2,
            mec="white",
            mew=0.6,
        )
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    plain_log_ticks(ax.xaxis)
    ax.set(xlabel="fit time (s, log scale)", ylabel=ylabel)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    legend_methods_backends(
        fig,
        sorted(set(stats["method"]), key=method_key),
        sorted(set(stats["backend"]), key=backend_key),
    )
    caption = (
        "Cost against quality: mean fit time (log scale) and test log-likelihood over splits and "
        "seeds (bars: ± standard error); colour = method, marker = backend. Up and left is better."
    )
    return figure_of(dataset, "runtime-quality", fig, caption)


def ood_entropy(results: SuiteResults, dataset: str) -> Figure | None:
    """Histograms of predictive entropy on test and out-of-distribution inputs, pooled over
    splits and seeds, per (method, backend)."""
    panels = []
    for method, backend, group in _groups(results, dataset):
        test, ood = [], []
        for cell_id in group["cell_id"]:
            pred = results.predictions(cell_id, ("test_entropy", "ood_entropy", "test_mean_probs"))
            if pred is not None and "ood_entropy" in pred and "test_entropy" in pred:
                test.append(pred["test_entropy"])
                ood.append(pred["ood_entropy"])
                probs = pred.get("test_mean_probs")
                classes = probs.shape[-1] if probs is not None and probs.ndim == 2 else None
        if test:
            panels.append((method, backend, np.concatenate(test), np.concatenate(ood), classes))
    if not panels:
        return None
    panels = panels[:MAX_PANELS]
    fig, axes = _grid(len(panels), sharex=True, panel=(2.6, 2.0))
    for ax, (method, backend, test, ood, classes) in zip(axes, panels, strict=True):
        top = math.log(classes) if classes else max(np.nanmax(test), np.nanmax(ood), 1e-3)
        bins = np.linspace(0, top, 25)
        kw = {"bins": bins, "density": True, "histtype": "stepfilled"}
        ax.hist(_finite(test), color=method_color(method), alpha=0.6, label="test", **kw)
        ax.hist(
            _finite(ood),
            bins=bins,
            density=True,
            histtype="step",
            color="black",
            lw=1.3,
            label="OOD",
        )
        ax.set_title(f"{method} · {backend}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_yticks([])
    axes[0].legend(fontsize=7, frameon=False)
    for ax in axes[-min(4, len(axes)) :]:
        ax.set_xlabel("predictive entropy (nats)", fontsize=8)
    caption = (
        "Predictive entropy on in-distribution test inputs (filled) and out-of-distribution inputs "
        "(black outline), pooled over splits and seeds: good uncertainty puts OOD mass to the "
        "right."
    )
    return figure_of(dataset, "ood-entropy", fig, caption)


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def loss_traces(results: SuiteResults, dataset: str) -> Figure | None:
    """Optimisation loss (negative ELBO estimate) per step, a panel per method, backends
    overlaid; ensemble members as thin lines."""
    by_method: dict[str, list] = {}
    for method, backend, group in _groups(results, dataset):
        found = _first_with(results, group, ("loss",))
        if found is not None:
            by_method.setdefault(method, []).append((backend, found[1]["loss"]))
    if not by_method:
        return None
    methods = sorted(by_method, key=method_key)[:MAX_PANELS]
    fig, axes = _grid(len(methods), ncols=3, panel=(3.3, 2.3))
    for ax, method in zip(axes, methods, strict=True):
        everything = []
        for backend, loss in by_method[method]:
            traces = np.atleast_2d(np.asarray(loss, dtype=float))
            thin = traces.shape[0] > 1
            for i, trace in enumerate(traces):
                steps = np.arange(1, len(trace) + 1)
                ax.plot(
                    steps,
                    trace,
                    color=method_color(method),
                    ls=backend_linestyle(backend),
                    lw=0.7 if thin else 1.1,
                    alpha=0.6 if thin else 0.9,
                    label=backend if i == 0 else None,
                )
            everything.append(traces[np.isfinite(traces)])
        values = np.concatenate(everything) if everything else np.array([])
        if values.size and np.all(values > 0):
            ax.set_yscale("log")
            plain_log_ticks(ax.yaxis)
        elif values.size:
            ax.set_yscale("symlog", linthresh=max(1.0, float(np.percentile(np.abs(values), 5))))
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
        ax.set_title(method, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, frameon=False)
    for ax in axes[-min(3, len(axes)) :]:
        ax.set_xlabel("step (log scale)", fontsize=8)
    caption = (
        "Optimisation traces: loss (negative ELBO estimate; for map/ensemble the negative log "
        "joint) per step on a log axis (symlog where the loss changes sign), first split and seed; "
        "solid NumPyro, dashed Pyro; ensemble members as thin lines."
    )
    return figure_of(dataset, "loss", fig, caption)


def rank_plot(results: SuiteResults, cell_id: str) -> Figure | None:
    """ArviZ rank plots of a few weights of one sampler cell (a single chain is cut in halves)."""
    posterior = results.group(cell_id, "posterior")
    if not posterior:
        return None
    data, halved = halves_if_single_chain(weight_summary(posterior))
    if not data:
        return None
    az = import_arviz()
    fig, axes = _grid(len(data), ncols=4, panel=(2.4, 1.9))
    az.plot_rank(data, ax=axes, kind="bars")
    for ax in axes:
        ax.title.set_fontsize(9)
        ax.tick_params(labelsize=7)
        ax.xaxis.label.set_fontsize(8)
        ax.yaxis.label.set_fontsize(8)
    row = results.cells.set_index("cell_id").loc[cell_id]
    caption = (
        f"Rank plots of a few weights, {row['dataset']} split {row['split']}, {row['method']} on "
        f"{row['backend']}: the bars of each chain should look uniform. "
    )
    if halved:
        caption += "The run has one chain, cut into halves here (within-chain stationarity). "
    caption += (
        "Weight ranks and R-hat are uninformative about convergence: weights are "
        "non-identifiable (hidden units can swap and flip sign, label-switching); use the R-hat "
        "of predictions instead."
    )
    return Figure(name=slug("rank", cell_id), png=_png(fig), caption=caption)


def weight_histograms(results: SuiteResults, dataset: str) -> Figure | None:
    """Histograms of per-weight posterior means and standard deviations, a row per method,
    backends overlaid (first split and seed)."""
    rows: dict[str, list] = {}
    for method, backend, group in _groups(results, dataset):
        ordered = group.sort_values(["split", "seed"])
        for cell_id in ordered["cell_id"]:
            posterior = results.group(cell_id, "posterior")
            if not posterior:
                continue
            means, stds = weight_moments(posterior)
            if means.size:
                rows.setdefault(method, []).append((backend, means, stds))
                break
    if not rows:
        return None
    methods = sorted(rows, key=method_key)[:MAX_PANELS]
    fig = MplFigure(figsize=(6.4, 1.55 * len(methods) + 0.5), layout="constrained")
    axes = fig.subplots(len(methods), 2, squeeze=False)
    all_means = np.concatenate([m for v in rows.values() for _, m, _ in v])
    all_stds = np.concatenate([s for v in rows.values() for _, _, s in v])
    mean_bins = _bins(all_means, symmetric=True)
    std_bins = _bins(all_stds)
    for (ax_mean, ax_std), method in zip(axes, methods, strict=True):
        for backend, means, stds in rows[method]:
            kw = {
                "histtype": "step",
                "color": method_color(method),
                "lw": 1.3,
                "ls": backend_linestyle(backend),
                "label": backend,
            }
            ax_mean.hist(_finite(means), bins=mean_bins, **kw)
            ax_std.hist(_finite(stds), bins=std_bins, **kw)
        ax_mean.set_ylabel(method, fontsize=9)
        for ax in (ax_mean, ax_std):
            ax.tick_params(labelsize=7)
            ax.set_yticks([])
        ax_std.legend(fontsize=7, frameon=False)
    axes[0, 0].set_title("posterior mean per weight", fontsize=9)
    axes[0, 1].set_title("posterior std per weight", fontsize=9)
    caption = (
        "Per-weight posterior means and standard deviations (all weights and biases, first split "
        "and seed; solid NumPyro, dashed Pyro). Point estimates (map) have zero spread."
    )
    return figure_of(dataset, "weights", fig, caption)


def _bins(values: np.ndarray, symmetric: bool = False, num: int = 40) -> np.ndarray:
    finite = _finite(values)
    if not finite.size:
        return np.linspace(0, 1, num)
    lo, hi = np.percentile(finite, [0.5, 99.5])
    if symmetric:
        edge = max(abs(lo), abs(hi), 1e-6)
        lo, hi = -edge, edge
    if hi <= lo:
        hi = lo + 1e-6
    return np.linspace(lo, hi, num)


def pruning(results: SuiteResults, dataset: str) -> Figure | None:
    """Test quality after pruning the weights with the lowest signal-to-noise |mu|/sigma (svi);
    where published figures exist, test error (%) with theirs as a black dashed line."""
    lines = []
    quality = None
    refs = published_pruning_for(dataset)
    for method, backend, group in _groups(results, dataset):
        curves = _pooled_curve(group, results, "pruning")
        if not curves:
            continue
        quality = quality or next((q for q in ("rmse", "accuracy") if q in curves[0]), None)
        ll = _mean_curve(curves, "fraction", "test_ll")
        score = _mean_curve(curves, "fraction", quality) if quality else None
        if ll is not None:
            lines.append((method, backend, ll, score))
    if not lines:
        return None
    as_error = quality == "accuracy" and bool(refs)
    fig, axes = _grid(2 if quality else 1, ncols=2, panel=(3.4, 2.7))
    for method, backend, ll, score in lines:
        kw = {
            "color": method_color(method),
            "ls": backend_linestyle(backend),
            "marker": backend_marker(backend),
            "ms": 4,
            "label": _title(method, backend),
        }
        axes[0].plot(100 * ll[0], ll[1], **kw)
        if score is not None and len(axes) > 1:
            axes[1].plot(100 * score[0], 100 * (1 - score[1]) if as_error else score[1], **kw)
    axes[0].set(xlabel="weights pruned (%)", ylabel="test log-likelihood")
    if len(axes) > 1:
        axes[1].set(xlabel="weights pruned (%)", ylabel="test error (%)" if as_error else quality)
    if as_error:
        for ref in refs:
            x, y = np.array(ref.test_error, dtype=float).T
            axes[1].plot(
                100 * x, y, color="black", ls="--", marker="s", ms=4, label=ref.source.label
            )
        axes[1].legend(fontsize=7, frameon=False)
    axes[0].legend(fontsize=7, frameon=False)
    caption = (
        "Weight pruning by signal-to-noise |mu|/sigma of the variational posterior (Blundell et "
        "al. 2015, Table 2): test quality after zeroing the given share of weights with the lowest "
        "ratio, mean over splits and seeds."
    )
    if as_error:
        caption += (
            " Black dashed: Blundell et al.'s published test error (typed in, not computed "
            "here) for their own MLP with two hidden layers of 1,200 units; see the table below."
        )
    return figure_of(dataset, "pruning", fig, caption)


def training_curves(results: SuiteResults, dataset: str) -> Figure | None:
    """svi's training curves (``curves["training"]``): the held-out log-likelihood and the two
    parts of the ELBO against the step, mean over splits and seeds, per backend."""
    panels = [
        ("held_out_ll", "held-out log-likelihood"),
        ("expected_log_lik", "E_q[log p(y | θ)]"),
        ("kl", "KL(q || p)"),
    ]
    lines = []
    for method, backend, group in _groups(results, dataset):
        curves = _pooled_curve(group, results, "training")
        if curves:
            means = {
                key: _mean_curve([c for c in curves if key in c], "step", key) for key, _ in panels
            }
            lines.append((method, backend, means, curves[0].get("kl_weight")))
    if not lines:
        return None
    shown = [(k, t) for k, t in panels if any(m[k] is not None for _, _, m, _ in lines)]
    fig, axes = _grid(len(shown), ncols=3, panel=(3.3, 2.5))
    for ax, (key, text) in zip(axes, shown, strict=True):
        for method, backend, means, _ in lines:
            if means[key] is None:
                continue
            ax.plot(
                *means[key],
                color=method_color(method),
                ls=backend_linestyle(backend),
                lw=1.1,
                label=_title(method, backend),
            )
        ax.set(xlabel="step", ylabel=f"{text} (nats)")
    axes[0].legend(fontsize=7, frameon=False)
    betas = sorted({fmt.number(b) for *_, b in lines if b is not None})
    caption = (
        "Training curves of svi, mean over splits and seeds (solid NumPyro, dashed Pyro), at "
        "regular checkpoints (every num_steps / 50 steps by default). Held-out "
        "log-likelihood: the mean log predictive density per point from 5 guide draws at each "
        "checkpoint, in original units, on (at most 500 points of) the test set: shown here "
        "only, never used to fit or to choose anything. E_q[log p(y | θ)] (all training "
        "points, the model's standardised units) and KL(q || p): the two parts of the ELBO, "
        "each the mean of the per-step estimates since the previous checkpoint, so that the "
        f"loss is -(E_q[log p(y | θ)] - β KL) (β = {', '.join(betas) or '1'})."
    )
    return figure_of(dataset, "training", fig, caption)


#: Figures drawn for every dataset, in the order they appear.
DATASET_FIGURES: tuple[Callable[[SuiteResults, str], Figure | None], ...] = (
    fits_1d,
    calibration,
    reliability,
    refuse,
    runtime_quality,
    ood_entropy,
    loss_traces,
    training_curves,
    weight_histograms,
    pruning,
)
