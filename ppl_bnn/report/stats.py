"""Numbers computed from stored results: group means, backend ratios, distances to a reference,
PSIS-LOO comparisons and ArviZ summaries. Every function returns a pandas frame."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.files import import_arviz
from ppl_bnn.report.load import SuiteResults, backend_key, method_key

logger = logging.getLogger(__name__)

GROUP = ("dataset", "method", "backend")
#: Statuses whose stored metrics enter the means (diverged cells keep their pre-divergence draws).
WITH_METRICS = ("ok", "diverged")
PROBLEM_STATUSES = ("failed", "timeout", "diverged")
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
        One row per group with cells with metrics (the ``by`` columns, ``cells``: contributing
        cells) and, per column ``c``, columns ``c:mean``, ``c:se`` and ``c:n``; no rows, but
        these columns, where no cell has metrics.
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
    names = [*by, "cells", *(f"{c}:{s}" for c in cols for s in ("n", "mean", "se"))]
    return sort_groups(pd.DataFrame(rows, columns=names)).reset_index(drop=True)


def status_counts(cells: pd.DataFrame, by: Sequence[str] = GROUP) -> pd.DataFrame:
    """Cells per status for each group, plus ``status_text`` such as ``"2 ok, 1 failed"``."""
    rows = []
    for key, group in cells.groupby(list(by), sort=False):
        counts = group["status"].value_counts()
        row: dict[str, Any] = dict(zip(by, key, strict=True))
        row.update({s: int(counts.get(s, 0)) for s in ("ok", *PROBLEM_STATUSES)})
        row["status_text"] = ", ".join(f"{int(n)} {s}" for s, n in counts.items())
        rows.append(row)
    columns = [*by, "ok", *PROBLEM_STATUSES, "status_text"]
    return sort_groups(pd.DataFrame(rows, columns=columns)).reset_index(drop=True)


def spread(n: int, keep: int) -> np.ndarray:
    """At most ``keep`` evenly spaced indices of ``range(n)``."""
    return np.unique(np.linspace(0, n - 1, min(n, keep)).round().astype(int))


def _thin_posterior(
    posterior: dict[str, np.ndarray], shape: tuple[int, ...], keep: int = LOO_REFF_PARAMS
) -> dict[str, np.ndarray]:
    """At most ``keep`` evenly spaced scalar parameters, (chain, draw, k), for PSIS-LOO's relative
    efficiency (mean ESS over parameters / draws): ArviZ loops over every parameter in Python,
    which is slow for a network of thousands of weights."""
    flat = [v.reshape(*shape, -1) for v in posterior.values() if v.shape[:2] == tuple(shape)]
    if not flat:
        return {"theta": np.zeros((*shape, 1))}
    params = np.concatenate(flat, axis=2)
    return {"theta": params[:, :, spread(params.shape[2], keep)]}


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
