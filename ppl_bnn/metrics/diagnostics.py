"""MCMC diagnostics: R-hat and ESS of predictions and sampler statistics."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ppl_bnn.metrics import checks
from ppl_bnn.metrics.convergence import bulk_ess, rank_rhat, tail_ess

# Test points used by the MCMC prediction diagnostics.
_DIAGNOSTIC_MAX_POINTS = 500


def _nan_reduce(reduce: Callable[[np.ndarray], Any], values: np.ndarray) -> float:
    """``reduce`` over the non-NaN values; NaN if there are none."""
    kept = values[~np.isnan(values)]
    return float(reduce(kept)) if kept.size else math.nan


#: Most draws (points x chains x draws) one vectorised pass over points holds: a reference's
#: 512 chains of 100 draws at 500 points would otherwise take gigabytes in its FFTs.
_POINTS_CHUNK_DRAWS = 2_000_000


def _check_draws(draws: ArrayLike, batched: bool) -> np.ndarray:
    """``draws`` (chain, draw, N) (with a leading axis when ``batched``) as floats, at most
    :data:`_DIAGNOSTIC_MAX_POINTS` evenly spaced points, with enough draws per chain."""
    raw = np.asarray(draws)
    ndim = 4 if batched else 3
    if raw.ndim == ndim and raw.shape[-1] > _DIAGNOSTIC_MAX_POINTS:
        # Subsample before converting, so that a large float32 array is not copied whole.
        idx = np.round(np.linspace(0, raw.shape[-1] - 1, _DIAGNOSTIC_MAX_POINTS)).astype(np.int64)
        raw = raw[..., idx]
    d = checks.float_array(raw, "draws", (ndim,))
    num_chains, num_draws = d.shape[-3:-1]
    min_draws = 4 if num_chains > 1 else 8
    if num_draws < min_draws:
        raise ValueError(
            f"draws needs at least {min_draws} draws per chain with {num_chains} chain(s), "
            f"got shape {d.shape}"
        )
    return d


def _by_point(d: np.ndarray, tail: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """R-hat, bulk ESS and (``tail``) tail ESS of each point of ``d`` (..., chain, draw, N),
    each (..., N): a point with a non-finite draw gets R-hat inf and ESS NaN. One chain is cut
    into its two halves for R-hat (see :func:`prediction_diagnostics`)."""
    num_chains, num_draws = d.shape[-3:-1]
    finite = np.isfinite(d).all(axis=(-3, -2))
    # Points first: (..., N, chain, draw), non-finite points zeroed (their results are masked).
    x = np.moveaxis(np.where(finite[..., None, None, :], d, 0.0), -1, -3)
    step = max(1, _POINTS_CHUNK_DRAWS // max(1, x[..., 0, :, :].size))
    parts: list[tuple[np.ndarray, ...]] = []
    with np.errstate(all="ignore"):
        for start in range(0, x.shape[-3], step):
            chunk = np.ascontiguousarray(x[..., start : start + step, :, :])
            halves = chunk
            if num_chains == 1:
                halves = chunk[..., 0, num_draws % 2 :].reshape(*chunk.shape[:-2], 2, -1)
            found = [rank_rhat(halves), bulk_ess(chunk)]
            if tail:
                found.append(tail_ess(chunk))
            parts.append(tuple(found))
    rhat, bulk, *rest = (np.concatenate(values, axis=-1) for values in zip(*parts, strict=True))
    ess_tail = np.where(finite, rest[0], np.nan) if tail else None
    return np.where(finite, rhat, np.inf), np.where(finite, bulk, np.nan), ess_tail


def _nan_reduce_last(reduce: Callable[..., np.ndarray], values: np.ndarray) -> np.ndarray:
    """``reduce`` (``np.nanmax``, ...) over the last axis, NaN where every value is NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice gives NaN
        return reduce(values, axis=-1)


def prediction_diagnostics(draws: ArrayLike) -> dict[str, float]:
    """R-hat and bulk/tail ESS of a scalar prediction per test point, summarised over points.

    The rank-normalised split R-hat (the max of bulk and folded R-hat) and bulk/tail ESS of
    Vehtari et al. 2021 (Bayesian Analysis 16(2)), as ArviZ computes them, vectorised over the
    points (:mod:`ppl_bnn.metrics.convergence`). One chain is cut into its two halves, treated
    as two chains (dropping the first draw if the count is odd), which are split again, so the
    R-hat compares the four quarters of the chain: a check of within-chain stationarity, not of
    mixing between independent chains. ESS always uses the chains as given.

    At most 500 test points are used, at evenly spaced indices, for speed. A point with a
    non-finite draw gets R-hat = inf and is left out of the ESS summaries; a point whose draws are
    all equal has an undefined (NaN) R-hat and is left out of the R-hat summaries.

    Args:
        draws: Predictions (chain, draw, N), e.g. f at the test inputs or the probability of the
            predicted class; at least 4 draws per chain (8 with a single chain).

    Returns:
        ``rhat_max``, ``rhat_median``, ``ess_bulk_min``, ``ess_bulk_median``, ``ess_tail_min``.
    """
    rhat, ess_bulk, ess_tail = _by_point(_check_draws(draws, batched=False), tail=True)
    return {
        "rhat_max": _nan_reduce(np.max, rhat),
        "rhat_median": _nan_reduce(np.median, rhat),
        "ess_bulk_min": _nan_reduce(np.min, ess_bulk),
        "ess_bulk_median": _nan_reduce(np.median, ess_bulk),
        "ess_tail_min": _nan_reduce(np.min, ess_tail),
    }


def each_chain_diagnostics(draws: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Each chain's ``rhat_max`` and ``ess_bulk_min`` of :func:`prediction_diagnostics` on it
    alone, from ``draws`` (chain, draw, N), in one vectorised pass: each (chain,)."""
    d = _check_draws(np.asarray(draws)[:, None], batched=True)
    rhat, ess_bulk, _ = _by_point(d, tail=False)
    return _nan_reduce_last(np.nanmax, rhat), _nan_reduce_last(np.nanmin, ess_bulk)


def _stat(sample_stats: Mapping[str, ArrayLike], key: str) -> np.ndarray | None:
    if key not in sample_stats:
        return None
    arr = checks.float_array(sample_stats[key], f"sample_stats[{key!r}]", (2,))
    return arr


def sampler_diagnostics(
    sample_stats: Mapping[str, ArrayLike], *, max_tree_depth: int | None = None
) -> dict[str, float]:
    r"""Summaries of sampler statistics shaped (chain, draw).

    Keys, each only when its statistics are present: ``divergences`` (number of ``diverging``
    draws) and ``divergence_rate`` (their share); ``max_tree_depth_share`` (share of draws with
    ``tree_depth >= max_tree_depth``; needs ``max_tree_depth``); ``ebfmi_min`` (the smallest
    per-chain E-BFMI from ``energy``, Betancourt 2016, "Diagnosing suboptimal cotangent
    disintegrations in Hamiltonian Monte Carlo":
    :math:`\sum_{i \ge 1} (E_i - E_{i-1})^2 / \sum_i (E_i - \bar E)^2`, values below 0.3 signal
    poor exploration; NaN for a chain with constant energy); ``mean_acceptance`` (mean
    ``acceptance_rate``); ``num_grads`` (sum of ``n_steps``, leapfrog steps = gradient
    evaluations).

    Args:
        sample_stats: Statistic name -> array (chain, draw).
        max_tree_depth: The NUTS tree-depth cap the run used.
    """
    out: dict[str, float] = {}
    diverging = _stat(sample_stats, "diverging")
    if diverging is not None:
        num_div = float(np.sum(diverging))
        out["divergences"] = num_div
        out["divergence_rate"] = num_div / diverging.size
    depth = _stat(sample_stats, "tree_depth")
    if max_tree_depth is not None:
        cap = checks.positive_int(max_tree_depth, "max_tree_depth")
        if depth is not None:
            out["max_tree_depth_share"] = float(np.mean(depth >= cap))
    energy = _stat(sample_stats, "energy")
    if energy is not None:
        if energy.shape[1] < 2:
            raise ValueError(
                f"sample_stats['energy'] needs at least 2 draws per chain, got {energy.shape}"
            )
        with np.errstate(all="ignore"):
            num = np.sum(np.diff(energy, axis=1) ** 2, axis=1)
            den = np.sum((energy - energy.mean(axis=1, keepdims=True)) ** 2, axis=1)
            out["ebfmi_min"] = float(np.min(num / den))
    acceptance = _stat(sample_stats, "acceptance_rate")
    if acceptance is not None:
        out["mean_acceptance"] = float(np.mean(acceptance))
    steps = _stat(sample_stats, "n_steps")
    if steps is not None:
        out["num_grads"] = float(np.sum(steps))
    return out
