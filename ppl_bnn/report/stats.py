"""Numbers computed from stored results: group means, backend ratios, distances to a reference,
PSIS-LOO comparisons and ArviZ summaries. Every function returns a pandas frame."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn import metrics
from ppl_bnn.files import import_arviz
from ppl_bnn.report.load import SuiteResults, backend_key, method_key

logger = logging.getLogger(__name__)

GROUP = ("dataset", "method", "backend")
#: Statuses whose stored metrics enter the means (diverged cells keep their pre-divergence draws).
WITH_METRICS = ("ok", "diverged")
PROBLEM_STATUSES = ("failed", "timeout", "diverged")
#: Test points (evenly spaced) on which W2 / KS to the reference are computed: their cost grows
#: with draws x points x quantiles, and a few hundred cells must render in about a minute.
MAX_REFERENCE_POINTS = 50
#: Parameters whose ESS gives PSIS-LOO's relative efficiency (see :func:`_thin_posterior`).
LOO_REFF_PARAMS = 64


def sort_groups(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows ordered by dataset (in order of first appearance), then canonical method and
    backend order."""
    if frame.empty:
        return frame
    datasets = list(dict.fromkeys(frame["dataset"])) if "dataset" in frame else []
    keys = [
        (
            datasets.index(row["dataset"]) if datasets else 0,
            method_key(str(row["method"])),
            backend_key(str(row["backend"])),
        )
        for _, row in frame.iterrows()
    ]
    return frame.iloc[sorted(range(len(frame)), key=keys.__getitem__)]


def group_stats(
    cells: pd.DataFrame, columns: Sequence[str], by: Sequence[str] = GROUP
) -> pd.DataFrame:
    """Mean, standard error and count of each column per group, over cells with metrics.

    The standard error is the sample standard deviation (ddof=1) over sqrt(n); NaN when n = 1.
    Missing and non-finite values are left out of each column separately.

    Returns:
        One row per group (the ``by`` columns, ``cells``: contributing cells) and, per column
        ``c``, columns ``c:mean``, ``c:se`` and ``c:n``.
    """
    cols = [c for c in columns if c in cells.columns]
    used = cells[cells["status"].isin(WITH_METRICS)]
    rows = []
    for key, group in used.groupby(list(by), sort=False):
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row["cells"] = len(group)
        for col in cols:
            values = group[col].to_numpy(dtype=float)
            values = values[np.isfinite(values)]
            n = len(values)
            row[f"{col}:n"] = n
            row[f"{col}:mean"] = float(values.mean()) if n else math.nan
            row[f"{col}:se"] = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        rows.append(row)
    return sort_groups(pd.DataFrame(rows)).reset_index(drop=True)


def status_counts(cells: pd.DataFrame, by: Sequence[str] = GROUP) -> pd.DataFrame:
    """Cells per status for each group, plus ``status_text`` such as ``"2 ok, 1 failed"``."""
    rows = []
    for key, group in cells.groupby(list(by), sort=False):
        counts = group["status"].value_counts()
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row.update({s: int(counts.get(s, 0)) for s in ("ok", *PROBLEM_STATUSES)})
        row["status_text"] = ", ".join(f"{int(n)} {s}" for s, n in counts.items())
        rows.append(row)
    return sort_groups(pd.DataFrame(rows)).reset_index(drop=True)


def _geomean(values: Iterable[float]) -> tuple[float, int]:
    arr = np.array([v for v in values if np.isfinite(v) and v > 0], dtype=float)
    return (float(np.exp(np.log(arr).mean())) if len(arr) else math.nan), len(arr)


def backend_pairs(
    cells: pd.DataFrame,
    quality: Sequence[str],
    costs: Sequence[str],
    a: str = "pyro",
    b: str = "numpyro",
) -> pd.DataFrame:
    """The same method on two backends, paired on (dataset, split, seed).

    Returns:
        Per (dataset, method): means of each ``quality`` column on both backends
        (``<col>:<backend>``) and, per ``costs`` column, the geometric mean over pairs of the
        ratio ``a / b`` (``<col>:ratio``, with ``<col>:pairs`` pairs).
    """
    used = cells[cells["status"].isin(WITH_METRICS)]
    keys = ["dataset", "method", "split", "seed"]
    left = used[used["backend"] == a].set_index(keys)
    right = used[used["backend"] == b].set_index(keys)
    common = left.index.intersection(right.index)
    if common.empty:
        return pd.DataFrame()
    left, right = left.loc[common], right.loc[common]
    rows = []
    for (dataset, method), idx in pd.Series(0, index=common).groupby(level=[0, 1], sort=False):
        lx, rx = left.loc[idx.index], right.loc[idx.index]
        row: dict[str, Any] = {"dataset": dataset, "method": method, "pairs": len(idx)}
        for col in quality:
            if col in used.columns:
                row[f"{col}:{a}"] = (
                    float(np.nanmean(lx[col])) if lx[col].notna().any() else math.nan
                )
                row[f"{col}:{b}"] = (
                    float(np.nanmean(rx[col])) if rx[col].notna().any() else math.nan
                )
        for col in costs:
            if col in used.columns:
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratios = lx[col].to_numpy(float) / rx[col].to_numpy(float)
                row[f"{col}:ratio"], row[f"{col}:pairs"] = _geomean(ratios)
        rows.append(row)
    out = pd.DataFrame(rows)
    out["backend"] = b
    return sort_groups(out).drop(columns="backend").reset_index(drop=True)


def reference_distances(results: SuiteResults) -> pd.DataFrame:
    """Distances of every cell's predictive to the reference posterior's, on the same
    (dataset, split, seed), from the stored predictions.

    Regression: ``w2`` and ``ks`` between predictive marginals (from ``test_f``, ``test_sigma``;
    :func:`ppl_bnn.metrics.mixture_w2` and :func:`~ppl_bnn.metrics.mixture_ks` in one pass) on at
    most :data:`MAX_REFERENCE_POINTS` evenly spaced test points; classification: ``agreement``
    and ``total_variation`` (from ``test_mean_probs``) on every test point.

    Returns:
        One row per compared cell (dataset, split, seed, method, backend, cell_id, the
        distances and ``points`` used); empty without a reference.
    """
    ref = results.reference
    cells = results.cells
    if ref is None or cells.empty:
        return pd.DataFrame()
    is_ref = (cells["method"] == ref[0]) & (cells["backend"] == ref[1]) & (cells["status"] == "ok")
    rows = []
    for _, ref_row in cells[is_ref].iterrows():
        ref_pred = results.predictions(ref_row["cell_id"])
        if ref_pred is None:
            continue
        same = (
            (cells["dataset"] == ref_row["dataset"])
            & (cells["split"] == ref_row["split"])
            & (cells["seed"] == ref_row["seed"])
            & ~is_ref
            & cells["status"].isin(WITH_METRICS)
        )
        for _, row in cells[same].iterrows():
            pred = results.predictions(row["cell_id"])
            if pred is None:
                continue
            if not _same_test_set(pred, ref_pred):
                logger.warning("%s: test set differs from the reference's", row["cell_id"])
                continue
            out: dict[str, Any] = {
                k: row[k] for k in ("dataset", "split", "seed", "method", "backend", "cell_id")
            }
            with np.errstate(all="ignore"):
                if "test_f" in pred and "test_f" in ref_pred:
                    keep = _spread(pred["test_f"].shape[-1], MAX_REFERENCE_POINTS)
                    distances = metrics.reference_metrics_regression(
                        pred["test_f"][:, keep], pred["test_sigma"],
                        ref_pred["test_f"][:, keep], ref_pred["test_sigma"],
                    )  # fmt: skip
                    out["w2"], out["ks"] = distances["ref_w2"], distances["ref_ks"]
                    out["points"] = len(keep)
                elif "test_mean_probs" in pred and "test_mean_probs" in ref_pred:
                    p, q = pred["test_mean_probs"], ref_pred["test_mean_probs"]
                    out["agreement"] = metrics.agreement(p, q)
                    out["total_variation"] = metrics.total_variation(p, q)
                    out["points"] = p.shape[0]
                else:
                    continue
            rows.append(out)
    return pd.DataFrame(rows)


def _spread(n: int, keep: int) -> np.ndarray:
    """At most ``keep`` evenly spaced indices of ``range(n)``."""
    return np.unique(np.linspace(0, n - 1, min(n, keep)).round().astype(int))


def _same_test_set(pred: Any, ref: Any) -> bool:
    if "test_y" not in pred or "test_y" not in ref:
        return False
    y, y_ref = np.asarray(pred["test_y"]), np.asarray(ref["test_y"])
    return y.shape == y_ref.shape and bool(np.allclose(y, y_ref, equal_nan=True))


def _thin_posterior(
    posterior: dict[str, np.ndarray], shape: tuple[int, ...], keep: int = LOO_REFF_PARAMS
) -> dict[str, np.ndarray]:
    """At most ``keep`` evenly spaced scalar parameters, (chain, draw, k), for PSIS-LOO's relative
    efficiency (mean ESS over parameters / draws): ArviZ loops over every parameter in Python,
    seconds per multi-chain cell for a few thousand weights."""
    flat = [v.reshape(*shape, -1) for v in posterior.values() if v.shape[:2] == tuple(shape)]
    if not flat:
        return {"theta": np.zeros((*shape, 1))}
    params = np.concatenate(flat, axis=2)
    return {"theta": params[:, :, _spread(params.shape[2], keep)]}


def _quietly(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    """Call ``fn``, collecting (not raising or printing) the warnings it emits."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    return out, [str(w.message).strip().splitlines()[0] for w in caught]


def loo_compare(results: SuiteResults) -> pd.DataFrame:
    """``az.compare`` (PSIS-LOO on the stored training log-likelihood) across methods, per
    (dataset, split, seed, backend) with at least two methods that have two or more draws.

    The relative efficiency PSIS uses for multi-chain runs comes from the ESS of at most
    :data:`LOO_REFF_PARAMS` evenly spaced parameters rather than all of them (for speed).

    Returns:
        ``az.compare``'s columns (``rank``, ``elpd_loo``, ``p_loo``, ``elpd_diff``, ``weight``,
        ``se``, ``dse``, ``warning``) with the group keys, ``method`` and ``pareto_k_bad`` (share
        of points with Pareto k > 0.7).
    """
    az = import_arviz()
    cells = results.cells
    if cells.empty:
        return pd.DataFrame()
    used = cells[cells["status"].isin(WITH_METRICS)]
    frames = []
    for key, group in used.groupby(["dataset", "split", "seed", "backend"], sort=False):
        if group["method"].nunique() < 2:
            continue
        loos: dict[str, Any] = {}
        bad_k: dict[str, float] = {}
        for _, row in group.iterrows():
            ll = results.group(row["cell_id"], "log_likelihood")
            posterior = results.group(row["cell_id"], "posterior")
            if not ll or not posterior or "y" not in ll or ll["y"].ndim != 3:
                continue
            if ll["y"].shape[0] * ll["y"].shape[1] < 2:
                continue
            try:
                thin = _thin_posterior(posterior, ll["y"].shape[:2])
                idata = az.from_dict(posterior=thin, log_likelihood={"y": ll["y"]})
                loo, caught = _quietly(az.loo, idata, pointwise=True)
            except (ValueError, TypeError, FloatingPointError) as err:
                logger.info("%s: PSIS-LOO failed: %s", row["cell_id"], err)
                continue
            if caught:
                logger.debug("%s: PSIS-LOO warnings: %s", row["cell_id"], caught)
            name = row["method"]
            loos[name] = loo
            bad_k[name] = float(np.mean(np.asarray(loo.pareto_k) > 0.7))
        if len(loos) < 2:
            continue
        try:
            table, _ = _quietly(az.compare, loos, ic="loo")
        except (ValueError, TypeError) as err:
            logger.info("az.compare failed for %s: %s", key, err)
            continue
        table = table.reset_index(names="method")
        for name, value in zip(("dataset", "split", "seed", "backend"), key, strict=True):
            table[name] = value
        table["pareto_k_bad"] = table["method"].map(bad_k)
        frames.append(table)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def weight_summary(
    posterior: dict[str, np.ndarray], max_per_site: int = 2, max_sites: int = 4
) -> dict[str, np.ndarray]:
    """A few scalar weights of a posterior as (chain, draw) arrays named like ``w0[0,1]``
    (the first entries of the first sites), for rank plots and ``az.summary``."""
    chosen: dict[str, np.ndarray] = {}
    names = [n for n in posterior if _is_weight(n) and posterior[n].ndim >= 2]
    for name in sorted(names, key=lambda n: (int(n[1:]), n[0] == "b"))[:max_sites]:
        values = posterior[name]
        flat = values.reshape(*values.shape[:2], -1)
        for i in range(min(max_per_site, flat.shape[2])):
            index = np.unravel_index(i, values.shape[2:])
            label = f"{name}[{','.join(str(int(j)) for j in index)}]" if index else name
            chosen[label] = flat[:, :, i]
    return chosen


def halves_if_single_chain(data: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], bool]:
    """(chain, draw) arrays, with a single chain cut into two halves (then treated as two
    chains: a check of within-chain stationarity); the flag says whether it was cut."""
    first = next(iter(data.values()))
    chains, draws = first.shape[:2]
    if chains > 1 or draws < 8:
        return data, False
    half = draws // 2
    return {
        k: v[:, draws - 2 * half :].reshape(2, half, *v.shape[2:]) for k, v in data.items()
    }, True


def weight_diagnostics(posterior: dict[str, np.ndarray]) -> tuple[pd.DataFrame, bool]:
    """``az.summary`` (mean, sd, bulk/tail ESS, R-hat) of a few weights of a sampler's posterior.

    Returns:
        The table and whether a single chain was cut into halves for it.
    """
    az = import_arviz()
    data = weight_summary(posterior)
    if not data:
        return pd.DataFrame(), False
    data, halved = halves_if_single_chain(data)
    kind = "all" if next(iter(data.values())).shape[0] > 1 else "stats"
    table, _ = _quietly(az.summary, data, kind=kind, round_to="none")
    keep = [c for c in ("mean", "sd", "ess_bulk", "ess_tail", "r_hat") if c in table.columns]
    return table[keep].reset_index(names="weight"), halved


def _is_weight(name: str) -> bool:
    """Network weight and bias sites are named w0, b0, w1, b1, ..."""
    return name[:1] in "wb" and name[1:].isdigit()


def weight_moments(posterior: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and std of every weight and bias (flattened over sites) from draws shaped
    (chain, draw, ...)."""
    means, stds = [], []
    for name, values in posterior.items():
        if _is_weight(name) and values.ndim >= 2:
            flat = values.reshape(values.shape[0] * values.shape[1], -1)
            means.append(flat.mean(axis=0))
            stds.append(flat.std(axis=0))
    if not means:
        return np.array([]), np.array([])
    return np.concatenate(means), np.concatenate(stds)
