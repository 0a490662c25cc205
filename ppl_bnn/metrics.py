r"""Metrics for posterior predictives: pure numpy/scipy, with ArviZ for R-hat and ESS.

Every function is unit-agnostic: callers convert predictions and targets to the units they report
(original units for regression) before calling. Shapes:

- regression: ``f`` (S, N) per-draw network outputs, ``sigma`` (S,) or (S, N) per-draw noise std,
  ``y`` (N,). The predictive of point n is the mixture
  :math:`p_n = \frac1S \sum_s \mathcal N(f_{sn}, \sigma_{sn}^2)`;
- classification: ``probs_draws`` (S, N, K) per-draw class probabilities, ``mean_probs`` (N, K)
  their mean over draws, ``y`` (N,) integer labels.

Invalid input (inconsistent shapes, NaN targets, ``sigma <= 0``, probabilities outside [0, 1] or
not summing to one, levels outside (0, 1), ``num_bins < 1``, ...) raises ``ValueError`` naming the
argument. Non-finite predictions are not an error: the test log-likelihood and the NLL average
over the finite points and count the others; the other metrics say per function what they do
(mostly: the result is NaN).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import entr, logsumexp, ndtr, ndtri
from scipy.stats import rankdata

from ppl_bnn.io import import_arviz

# Largest number of elements of a temporary array in the chunked computations (32 MiB of float64).
_CHUNK = 1 << 22
# Draws used by the O(S^2) pairwise term of the CRPS.
_PAIRWISE_MAX_DRAWS = 256
# Test points used by the MCMC prediction diagnostics.
_DIAGNOSTIC_MAX_POINTS = 500
# Probabilities must sum to one within this tolerance.
_PROB_SUM_ATOL = 1e-6
# Quantile solver: relative tolerance, bracket half-width in component stds, iteration cap.
_QUANTILE_RTOL = 1e-8
_BRACKET_STDS = 10.0
_QUANTILE_MAX_ITER = 200

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# --- validation ---------------------------------------------------------------------------------


def _float_array(x: ArrayLike, name: str, ndims: tuple[int, ...]) -> np.ndarray:
    """``x`` as a non-empty float64 array with one of the allowed numbers of dimensions."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a numeric array") from err
    if arr.ndim not in ndims:
        allowed = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"{name} must be {allowed}, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    return arr


def _regression_inputs(
    f: ArrayLike, sigma: ArrayLike, f_name: str = "f", sigma_name: str = "sigma"
) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``f`` (S, N) and ``sigma`` broadcast to (S, N)."""
    f_arr = _float_array(f, f_name, (2,))
    num_draws, num_points = f_arr.shape
    s_arr = _float_array(sigma, sigma_name, (1, 2))
    if s_arr.shape not in ((num_draws,), (num_draws, num_points)):
        raise ValueError(
            f"{sigma_name} must have shape ({num_draws},) or ({num_draws}, {num_points}) to match "
            f"{f_name} of shape {f_arr.shape}, got {s_arr.shape}"
        )
    if np.any(s_arr <= 0):
        raise ValueError(f"{sigma_name} must be > 0 (a noise std), got minimum {np.nanmin(s_arr)}")
    if s_arr.ndim == 1:
        s_arr = np.broadcast_to(s_arr[:, None], f_arr.shape)
    return f_arr, s_arr


def _targets(y: ArrayLike, num_points: int, name: str = "y") -> np.ndarray:
    """Validated regression targets (N,)."""
    y_arr = _float_array(y, name, (1,))
    if y_arr.shape[0] != num_points:
        raise ValueError(
            f"{name} must have length {num_points} (the number of points), got {y_arr.shape[0]}"
        )
    if np.isnan(y_arr).any():
        raise ValueError(f"{name} contains NaN")
    if np.isinf(y_arr).any():
        raise ValueError(f"{name} contains inf")
    return y_arr


def _probs(p: ArrayLike, name: str, ndim: int) -> np.ndarray:
    """Validated probabilities, classes on the last axis; non-finite entries are let through."""
    arr = _float_array(p, name, (ndim,))
    finite = np.isfinite(arr)
    checked = np.where(finite, arr, 0.5)
    if np.any((checked < 0) | (checked > 1)):
        raise ValueError(f"{name} must lie in [0, 1]")
    sums = np.where(finite.all(axis=-1), checked.sum(axis=-1), 1.0)
    worst = float(np.max(np.abs(sums - 1.0)))
    if worst > _PROB_SUM_ATOL:
        raise ValueError(
            f"{name} must sum to 1 over classes (last axis) within {_PROB_SUM_ATOL:g}; "
            f"off by up to {worst:.3g}"
        )
    return arr


def _labels(y: ArrayLike, num_points: int, num_classes: int, name: str = "y") -> np.ndarray:
    """Validated integer class labels (N,) in [0, K)."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != num_points:
        raise ValueError(
            f"{name} must have length {num_points} (the number of points), got {arr.shape[0]}"
        )
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be integer class labels, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise ValueError(f"{name} contains NaN")
        if not np.all(np.isfinite(arr) & (arr == np.round(arr))):
            raise ValueError(f"{name} must be integer class labels")
    labels = arr.astype(np.int64)
    if np.any((labels < 0) | (labels >= num_classes)):
        raise ValueError(f"{name} must be class labels in [0, {num_classes})")
    return labels


def _open_unit(values: ArrayLike, name: str) -> np.ndarray:
    """Validated 1-D array of numbers strictly inside (0, 1)."""
    arr = _float_array(values, name, (1,))
    if not np.all((arr > 0) & (arr < 1)):
        raise ValueError(f"{name} must be in (0, 1), got {arr.tolist()}")
    return arr


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _same_points(n: int, n_ref: int, name: str, ref_name: str) -> None:
    if n != n_ref:
        raise ValueError(
            f"{name} and {ref_name} must have the same number of points, got {n} and {n_ref}"
        )


# --- regression ---------------------------------------------------------------------------------


def rmse(mean: ArrayLike, y: ArrayLike) -> float:
    r"""Root mean squared error :math:`\sqrt{\frac1N\sum_n (\bar f_n - y_n)^2}`.

    Args:
        mean: Predictive means (N,). Non-finite values give a non-finite result.
        y: Targets (N,).
    """
    mean_arr = _float_array(mean, "mean", (1,))
    y_arr = _targets(y, mean_arr.shape[0])
    with np.errstate(all="ignore"):
        return float(np.sqrt(np.mean((mean_arr - y_arr) ** 2)))


def _pointwise_ll(f: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        z = (y[None, :] - f) / s
        log_p = -0.5 * z * z - np.log(s) - _LOG_SQRT_2PI
        return logsumexp(log_p, axis=0) - math.log(f.shape[0])


def _finite_mean(values: np.ndarray) -> tuple[float, int]:
    """Mean over the finite values and the number of non-finite ones (NaN mean if none finite)."""
    finite = np.isfinite(values)
    num_bad = int(values.size - finite.sum())
    if num_bad == values.size:
        return math.nan, num_bad
    return float(np.mean(values[finite])), num_bad


def pointwise_log_likelihood(f: ArrayLike, sigma: ArrayLike, y: ArrayLike) -> np.ndarray:
    r"""Log predictive density per point, :math:`\log \frac1S \sum_s \mathcal N(y_n \mid f_{sn},
    \sigma_{sn}^2)`, by log-sum-exp over draws (never clipped).

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).

    Returns:
        (N,) values; a point where a draw's output is NaN gets NaN.
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    y_arr = _targets(y, f_arr.shape[1])
    return _pointwise_ll(f_arr, s_arr, y_arr)


def test_log_likelihood(f: ArrayLike, sigma: ArrayLike, y: ArrayLike) -> tuple[float, int]:
    """Mean test log predictive density over the points where it is finite.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).

    Returns:
        ``(mean over finite pointwise values, number of non-finite points)``; ``(nan, N)`` when
        no point is finite. Values are never clipped.
    """
    return _finite_mean(pointwise_log_likelihood(f, sigma, y))


# Not a test: pytest would otherwise collect this function when a test module imports it.
test_log_likelihood.__test__ = False  # type: ignore[attr-defined]


def _mixture_at(
    f: np.ndarray,
    s: np.ndarray,
    x: np.ndarray,
    cols: np.ndarray,
    sign: np.ndarray | None = None,
    *,
    derivatives: bool = False,
) -> tuple[np.ndarray, ...]:
    """Mixture CDF of point ``cols[a]`` at ``x[a]`` (and its first two derivatives), chunked.

    Where ``sign[a] = -1`` the mixture of ``-X`` is used: its lower tail is the upper tail of
    ``X``, computed without the cancellation in ``1 - F``.

    Returns:
        ``(cdf,)`` or ``(cdf, pdf, pdf')``, each shaped like ``x``.
    """
    num_draws = f.shape[0]
    outs = [np.empty(x.shape[0]) for _ in range(3 if derivatives else 1)]
    # sigma broadcast from (S,) (stride 0 over points) needs no gathering.
    per_draw_sd = s.strides[1] == 0 or s.shape[1] == 1
    step = max(1, _CHUNK // num_draws)
    with np.errstate(all="ignore"):
        for start in range(0, x.shape[0], step):
            part = slice(start, start + step)
            idx = cols[part]
            inv_sd = 1.0 / (s[:, :1] if per_draw_sd else s[:, idx])
            z = f[:, idx] if sign is None else f[:, idx] * sign[part]
            np.subtract(x[part], z, out=z)
            z *= inv_sd
            if derivatives:
                weight = np.exp(-0.5 * z * z) * inv_sd
                outs[1][part] = weight.mean(axis=0) * _INV_SQRT_2PI
                weight *= z
                weight *= inv_sd
                outs[2][part] = -weight.mean(axis=0) * _INV_SQRT_2PI
            outs[0][part] = ndtr(z, out=z).mean(axis=0)
    return tuple(outs)


def mixture_cdf(f: ArrayLike, sigma: ArrayLike, t: ArrayLike) -> np.ndarray:
    r"""CDF of each point's predictive mixture, :math:`F_n(t) = \frac1S\sum_s
    \Phi((t - f_{sn}) / \sigma_{sn})`.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        t: Evaluation points (..., N) (the last axis indexes the points) or a scalar.

    Returns:
        ``F_n(t[..., n])`` shaped like ``t`` broadcast to (..., N).
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    num_points = f_arr.shape[1]
    t_arr = np.asarray(t, dtype=np.float64)
    if t_arr.ndim == 0:
        t_arr = np.full(num_points, float(t_arr))
    if t_arr.shape[-1] != num_points:
        raise ValueError(
            f"t must have last axis of length {num_points} (points), got shape {t_arr.shape}"
        )
    flat = t_arr.reshape(-1)
    cols = np.tile(np.arange(num_points), flat.size // num_points)
    return _mixture_at(f_arr, s_arr, flat, cols)[0].reshape(t_arr.shape)


def _quantiles(f: np.ndarray, s: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Mixture quantiles (P, N); NaN where a point has a non-finite ``f`` or ``sigma``.

    Levels above 1/2 are solved as lower quantiles of the mixture of ``-X``, so the CDF is only
    needed where it is small and accurate. Halley's method runs on normal scores,
    ``h(x) = Phi^-1(F(x)) - Phi^-1(p)`` (exactly linear for one Gaussian, close to linear in a
    mixture's tails), from the moment-matched Gaussian's quantile, inside a bracket that every
    evaluation shrinks; a step that leaves the bracket is replaced by bisection.
    """
    num_levels = probs.size
    out = np.full((num_levels, f.shape[1]), np.nan)
    good = np.flatnonzero(np.isfinite(f).all(axis=0) & np.isfinite(s).all(axis=0))
    if good.size == 0:
        return out
    fg, sg = f[:, good], s[:, good]
    # One flat root-finding problem per (level, point).
    cols = np.tile(good, num_levels)
    upper = np.repeat(probs > 0.5, good.size)
    sign = np.where(upper, -1.0, 1.0)
    p_low = np.repeat(np.minimum(probs, 1.0 - probs), good.size)
    z_target = ndtri(p_low)
    bottom = np.tile((fg - _BRACKET_STDS * sg).min(axis=0), num_levels)
    top = np.tile((fg + _BRACKET_STDS * sg).max(axis=0), num_levels)
    lo = np.where(upper, -top, bottom)
    hi = np.where(upper, -bottom, top)
    # F(lo) <= Phi(-10) ~ 7.6e-24 <= F(hi) = 1: widen lo only for levels further out than that.
    far = np.flatnonzero(p_low < ndtr(-_BRACKET_STDS))
    for _ in range(64):
        if far.size == 0:
            break
        far = far[_mixture_at(f, s, lo[far], cols[far], sign[far])[0] > p_low[far]]
        lo[far] -= hi[far] - lo[far]
    mean = np.tile(fg.mean(axis=0), num_levels) * sign
    std = np.tile(np.sqrt(fg.var(axis=0) + (sg**2).mean(axis=0)), num_levels)
    x = np.clip(mean + std * z_target, lo, hi)
    scale = np.tile(sg.min(axis=0), num_levels)
    active = np.arange(x.size)
    for _ in range(_QUANTILE_MAX_ITER):
        if active.size == 0:
            break
        xa = x[active]
        cdf, pdf, dpdf = _mixture_at(f, s, xa, cols[active], sign[active], derivatives=True)
        with np.errstate(all="ignore"):
            # h = Phi^-1(F) - Phi^-1(p) with score = Phi^-1(F): h' = F' / phi(score) and
            # h'' = F'' / phi(score) + score h'^2.
            score = ndtri(np.clip(cdf, 0.0, 1.0))
            gap = score - z_target[active]
            la = np.where(gap < 0, xa, lo[active])
            ha = np.where(gap > 0, xa, hi[active])
            phi = np.exp(-0.5 * score * score) * _INV_SQRT_2PI
            slope = pdf / phi
            curvature = dpdf / phi + score * slope * slope
            # Halley's step (cubic convergence), Newton's where Halley's denominator is not
            # positive, bisection where the step leaves the bracket.
            denom = 2.0 * slope * slope - gap * curvature
            step = np.where(denom > 0, 2.0 * gap * slope / denom, gap / slope)
            proposal = xa - step
            tol = _QUANTILE_RTOL * (np.abs(xa) + scale[active])
            # A step just past a bracket end (within tol) lands on it: the root is that close.
            clipped = np.clip(proposal, la, ha)
            take = np.isfinite(proposal) & (np.abs(clipped - proposal) <= tol)
            x_new = np.where(take, clipped, 0.5 * (la + ha))
        done = (gap == 0) | (np.abs(x_new - xa) <= tol) | (ha - la <= tol)
        x[active] = np.where(gap == 0, xa, x_new)
        lo[active], hi[active] = la, ha
        active = active[~done]
    out[:, good] = (x * sign).reshape(num_levels, good.size)
    return out


def mixture_quantiles(f: ArrayLike, sigma: ArrayLike, probs: Sequence[float]) -> np.ndarray:
    """Quantiles of each point's predictive mixture.

    Safeguarded Halley iteration (on the normal scores of the mixture CDF, bisection when a step
    leaves the bracket), vectorised over levels and points, inside the bracket
    ``[min_s(f - 10 sigma), max_s(f + 10 sigma)]`` (widened for levels beyond it), to a
    tolerance of 1e-8 times ``|q|`` plus the smallest component std. Each iteration evaluates
    the mixture CDF, O(S) per level and point; about three iterations are typical.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        probs: Levels in (0, 1).

    Returns:
        (len(probs), N) quantiles; NaN for a point with a non-finite ``f`` or ``sigma``.
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    return _quantiles(f_arr, s_arr, _open_unit(probs, "probs"))


def _central_intervals(
    f: np.ndarray, s: np.ndarray, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends (L, N) of the central ``levels`` intervals."""
    q = _quantiles(f, s, np.concatenate([(1.0 - levels) / 2.0, (1.0 + levels) / 2.0]))
    return q[: levels.size], q[levels.size :]


def _coverage(f: np.ndarray, s: np.ndarray, y: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Coverage per level from each target's two tail probabilities.

    With a continuous, increasing mixture CDF ``F``, ``y`` lies in ``[Q((1 - l)/2), Q((1 + l)/2)]``
    exactly when ``F(y) >= (1 - l)/2`` and ``1 - F(y) >= (1 - l)/2``, so one evaluation of each
    tail per point serves every level (no quantiles are solved). The upper tail is the lower tail
    of ``-X``, without the cancellation in ``1 - F``. Non-finite points are never covered.
    """
    cols = np.arange(f.shape[1])
    below = _mixture_at(f, s, y, cols)[0]
    above = _mixture_at(f, s, -y, cols, np.full(cols.size, -1.0))[0]
    good = np.isfinite(f).all(axis=0) & np.isfinite(s).all(axis=0)
    tail = (1.0 - levels[:, None]) / 2.0
    return ((below >= tail) & (above >= tail) & good).mean(axis=1)


def interval_coverage(
    f: ArrayLike,
    sigma: ArrayLike,
    y: ArrayLike,
    levels: Sequence[float] = (0.5, 0.9, 0.95),
) -> dict[float, float]:
    """Fraction of targets inside the central ``level`` interval of their predictive mixture.

    The interval is ``[Q((1 - level) / 2), Q((1 + level) / 2)]`` with ``Q`` the mixture quantile
    function. A point with non-finite predictions has a NaN interval and counts as not covered.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).
        levels: Nominal coverages in (0, 1).

    Returns:
        ``{level: empirical coverage}``.
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    y_arr = _targets(y, f_arr.shape[1])
    lv = _open_unit(levels, "levels")
    cov = _coverage(f_arr, s_arr, y_arr, lv)
    return {float(level): float(c) for level, c in zip(lv, cov, strict=True)}


def _abs_moment(m: np.ndarray, sd: np.ndarray) -> np.ndarray:
    r""":math:`E|Z|` for :math:`Z \sim \mathcal N(m, sd^2)`:
    :math:`sd\sqrt{2/\pi}\, e^{-m^2/(2 sd^2)} + m(1 - 2\Phi(-m/sd))`."""
    z = m / sd
    out = np.exp(-0.5 * z * z)
    out *= sd
    out *= _SQRT_2_OVER_PI
    np.negative(z, out=z)
    tail = ndtr(z, out=z)
    tail *= -2.0
    tail += 1.0
    tail *= m
    out += tail
    return out


def _crps_points(f: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """CRPS per point (N,); the pairwise term over at most 256 evenly spaced draws."""
    num_draws, num_points = f.shape
    pair_idx = np.arange(num_draws)
    if num_draws > _PAIRWISE_MAX_DRAWS:
        pair_idx = np.round(np.linspace(0, num_draws - 1, _PAIRWISE_MAX_DRAWS)).astype(np.int64)
    fp, var_p = f[pair_idx], s[pair_idx] ** 2
    # E|X - X'| sums A(f_s - f_t, .) over ordered pairs: the diagonal (A(0, sqrt(2) sigma_s) =
    # 2 sigma_s / sqrt(pi)) plus twice the pairs s < t.
    first, second = np.triu_indices(pair_idx.size, k=1)
    diagonal = 2.0 / math.sqrt(math.pi) * np.sqrt(var_p).sum(axis=0)
    out = np.empty(num_points)
    step = max(1, _CHUNK // max(num_draws, first.size))
    with np.errstate(all="ignore"):
        for start in range(0, num_points, step):
            part = slice(start, start + step)
            spread = _abs_moment(y[None, part] - f[:, part], s[:, part]).mean(axis=0)
            diff = fp[first, part] - fp[second, part]
            sd = np.sqrt(var_p[first, part] + var_p[second, part])
            pair_sum = diagonal[part] + 2.0 * _abs_moment(diff, sd).sum(axis=0)
            out[part] = spread - 0.5 * pair_sum / pair_idx.size**2
    return out


def crps(f: ArrayLike, sigma: ArrayLike, y: ArrayLike) -> float:
    r"""Mean continuous ranked probability score of the Gaussian-mixture predictive.

    Closed form (Grimit et al. 2006, QJRMS 132; Gneiting & Raftery 2007):
    :math:`\mathrm{CRPS}(F, y) = E|X - y| - \tfrac12 E|X - X'|` with :math:`X, X' \sim F`
    independent, and :math:`E|Z| = s\sqrt{2/\pi}\, e^{-m^2/(2s^2)} + m(1 - 2\Phi(-m/s))` for
    :math:`Z \sim \mathcal N(m, s^2)`; for the mixture,
    :math:`E|X - y| = \frac1S\sum_s E|\mathcal N(y - f_s, \sigma_s^2)|` and
    :math:`E|X - X'| = \frac1{S^2}\sum_{s,t} E|\mathcal N(f_s - f_t, \sigma_s^2 + \sigma_t^2)|`.

    The pairwise term costs O(S^2 N) and is computed in memory-bounded chunks; when S > 256 it
    uses 256 evenly spaced draws only (the first term always uses all draws), an estimate of the
    S-draw mixture's CRPS rather than its exact value. Lower is better.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).

    Returns:
        Mean CRPS over points; NaN if a prediction is non-finite.
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    y_arr = _targets(y, f_arr.shape[1])
    return float(np.mean(_crps_points(f_arr, s_arr, y_arr)))


def _coverage_keys(levels: np.ndarray) -> list[str]:
    keys = [f"coverage_{round(100 * level)}" for level in levels]
    if len(set(keys)) != len(keys):
        raise ValueError(f"levels must give distinct percentages, got {levels.tolist()}")
    return keys


def regression_metrics(
    f: ArrayLike,
    sigma: ArrayLike,
    y: ArrayLike,
    *,
    levels: Sequence[float] = (0.5, 0.9, 0.95),
) -> dict[str, float]:
    r"""All regression metrics of the design in one dict.

    Keys: ``rmse`` (of the mixture mean :math:`\bar f_n`), ``test_ll`` and ``n_nonfinite_ll`` (see
    :func:`test_log_likelihood`), ``coverage_<round(100 level)>`` per level (see
    :func:`interval_coverage`), ``crps`` (see :func:`crps`), ``epistemic_std``
    (:math:`\frac1N\sum_n \operatorname{std}_s f_{sn}`), ``total_std``
    (:math:`\frac1N\sum_n \sqrt{\operatorname{Var}_s f_{sn} + \frac1S\sum_s\sigma_{sn}^2}`) and
    ``mean_interval_width_95`` (mean width of the central 95% interval).

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).
        levels: Nominal coverages in (0, 1).
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    y_arr = _targets(y, f_arr.shape[1])
    lv = _open_unit(levels, "levels")
    keys = _coverage_keys(lv)
    covered = _coverage(f_arr, s_arr, y_arr, lv)
    lower, upper = _central_intervals(f_arr, s_arr, np.array([0.95]))
    test_ll, num_bad = _finite_mean(_pointwise_ll(f_arr, s_arr, y_arr))
    with np.errstate(all="ignore"):
        out: dict[str, float] = {
            "rmse": float(np.sqrt(np.mean((f_arr.mean(axis=0) - y_arr) ** 2))),
            "test_ll": test_ll,
            "n_nonfinite_ll": num_bad,
        }
        out.update({k: float(c) for k, c in zip(keys, covered, strict=True)})
        out["crps"] = float(np.mean(_crps_points(f_arr, s_arr, y_arr)))
        out["epistemic_std"] = float(np.mean(f_arr.std(axis=0)))
        out["total_std"] = float(np.mean(np.sqrt(f_arr.var(axis=0) + (s_arr**2).mean(axis=0))))
        out["mean_interval_width_95"] = float(np.mean(upper[0] - lower[0]))
    return out


def calibration_curve(
    f: ArrayLike,
    sigma: ArrayLike,
    y: ArrayLike,
    levels: ArrayLike = np.linspace(0.05, 0.95, 19),  # noqa: B008 (read-only default)
) -> dict[str, list[float]]:
    """Empirical against nominal coverage of central predictive intervals (calibration figure).

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).
        levels: Nominal coverages in (0, 1).

    Returns:
        ``{"nominal": levels, "empirical": coverages}``; see :func:`interval_coverage`.
    """
    f_arr, s_arr = _regression_inputs(f, sigma)
    y_arr = _targets(y, f_arr.shape[1])
    lv = _open_unit(levels, "levels")
    return {
        "nominal": lv.tolist(),
        "empirical": _coverage(f_arr, s_arr, y_arr, lv).tolist(),
    }


# --- classification -----------------------------------------------------------------------------


def _confidence_and_prediction(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max probability and argmax per row (N,); NaN and -1 for rows with non-finite entries."""
    finite = np.isfinite(p).all(axis=-1)
    safe = np.where(finite[:, None], p, 0.0)
    conf = np.where(finite, safe.max(axis=-1), np.nan)
    pred = np.where(finite, safe.argmax(axis=-1), -1)
    return conf, pred


def _mean_probs_and_labels(mean_probs: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p = _probs(mean_probs, "mean_probs", 2)
    return p, _labels(y, p.shape[0], p.shape[1])


def accuracy(mean_probs: ArrayLike, y: ArrayLike) -> float:
    """Fraction of points whose most probable class is the label.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).

    Returns:
        Accuracy; a row with non-finite probabilities has no prediction and counts as wrong.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    return float(np.mean(_confidence_and_prediction(p)[1] == labels))


def _nll_points(p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    picked = p[:, np.arange(p.shape[1]), labels]
    with np.errstate(all="ignore"):
        return -(logsumexp(np.log(picked), axis=0) - math.log(p.shape[0]))


def nll(probs_draws: ArrayLike, y: ArrayLike) -> float:
    r"""Mean negative log predictive probability of the label over the finite points.

    :math:`-\log \frac1S \sum_s p_s(y_n \mid x_n)` per point, computed as log-mean-exp of
    :math:`\log p_s(y_n)` with no floor: a point whose label has probability exactly 0 under every
    draw (or a NaN probability) is non-finite and left out of the mean; ``classification_metrics``
    reports their number as ``n_nonfinite_nll``.

    Args:
        probs_draws: Per-draw class probabilities (S, N, K).
        y: Labels (N,).

    Returns:
        Mean over finite points; NaN if no point is finite.
    """
    p = _probs(probs_draws, "probs_draws", 3)
    labels = _labels(y, p.shape[1], p.shape[2])
    return _finite_mean(_nll_points(p, labels))[0]


def brier(mean_probs: ArrayLike, y: ArrayLike) -> float:
    r"""Brier score :math:`\frac1N\sum_n\sum_k (p_{nk} - 1[y_n = k])^2` (Brier 1950).

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).

    Returns:
        Mean score (NaN if a probability is non-finite); lower is better.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    onehot = np.eye(p.shape[1])[labels]
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def _bin_edges(num_bins: int) -> np.ndarray:
    return np.linspace(0.0, 1.0, num_bins + 1)


def _bins(conf: np.ndarray, correct: np.ndarray, num_bins: int) -> tuple[np.ndarray, ...]:
    """Count, summed confidence and summed correctness per bin ``(lower, upper]`` (0 in bin 0)."""
    idx = np.clip(np.searchsorted(_bin_edges(num_bins), conf, side="left") - 1, 0, num_bins - 1)
    count = np.bincount(idx, minlength=num_bins)
    sum_conf = np.bincount(idx, weights=conf, minlength=num_bins)
    sum_correct = np.bincount(idx, weights=correct.astype(np.float64), minlength=num_bins)
    return count, sum_conf, sum_correct


def expected_calibration_error(mean_probs: ArrayLike, y: ArrayLike, num_bins: int = 15) -> float:
    r"""Expected calibration error (Guo et al. 2017, "On Calibration of Modern Neural Networks").

    With confidence :math:`c_n = \max_k p_{nk}` binned into ``num_bins`` equal-width bins
    :math:`B_b = ((b-1)/M, b/M]` of [0, 1]:
    :math:`\mathrm{ECE} = \sum_b \frac{|B_b|}{N} |\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|`.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).
        num_bins: Number of bins (>= 1).

    Returns:
        ECE in [0, 1]; NaN if a probability is non-finite.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    bins = _positive_int(num_bins, "num_bins")
    conf, pred = _confidence_and_prediction(p)
    if np.isnan(conf).any():
        return math.nan
    _, sum_conf, sum_correct = _bins(conf, pred == labels, bins)
    return float(np.sum(np.abs(sum_correct - sum_conf)) / conf.size)


def reliability_diagram(
    mean_probs: ArrayLike, y: ArrayLike, num_bins: int = 15
) -> dict[str, list[Any]]:
    """Per-bin mean confidence and accuracy, the bins of :func:`expected_calibration_error`.

    Args:
        mean_probs: Predictive class probabilities (N, K); rows with non-finite entries are left
            out.
        y: Labels (N,).
        num_bins: Number of bins (>= 1).

    Returns:
        ``{"bin_lower", "bin_upper", "confidence", "accuracy", "count"}``, one entry per bin; an
        empty bin has count 0 and NaN confidence and accuracy.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    bins = _positive_int(num_bins, "num_bins")
    conf, pred = _confidence_and_prediction(p)
    keep = np.isfinite(conf)
    count, sum_conf, sum_correct = _bins(conf[keep], pred[keep] == labels[keep], bins)
    with np.errstate(all="ignore"):
        mean_conf = np.where(count > 0, sum_conf / count, np.nan)
        mean_acc = np.where(count > 0, sum_correct / count, np.nan)
    edges = _bin_edges(bins)
    return {
        "bin_lower": edges[:-1].tolist(),
        "bin_upper": edges[1:].tolist(),
        "confidence": mean_conf.tolist(),
        "accuracy": mean_acc.tolist(),
        "count": count.tolist(),
    }


def predictive_entropy(mean_probs: ArrayLike) -> np.ndarray:
    r"""Entropy of the predictive, :math:`H_n = -\sum_k p_{nk} \log p_{nk}` (nats, 0 log 0 = 0).

    Args:
        mean_probs: Predictive class probabilities (N, K).

    Returns:
        (N,) entropies; NaN for rows with a NaN probability.
    """
    p = _probs(mean_probs, "mean_probs", 2)
    return entr(p).sum(axis=-1)


def auroc(scores_negative: ArrayLike, scores_positive: ArrayLike) -> float:
    r"""Area under the ROC curve where positives should score higher.

    The Mann-Whitney statistic (Hanley & McNeil 1982):
    :math:`\frac{1}{n_+ n_-}\sum_{i \in +}\sum_{j \in -} (1[s_i > s_j] + \tfrac12 1[s_i = s_j])`,
    computed from average ranks in O(n log n). For OOD detection by entropy:
    ``auroc(entropy(in-distribution test), entropy(OOD))``.

    Args:
        scores_negative: Scores of the negatives (n_-,).
        scores_positive: Scores of the positives (n_+,).

    Returns:
        AUROC in [0, 1] (0.5: no separation); NaN if a score is NaN.
    """
    neg = _float_array(scores_negative, "scores_negative", (1,))
    pos = _float_array(scores_positive, "scores_positive", (1,))
    if np.isnan(neg).any() or np.isnan(pos).any():
        return math.nan
    ranks = rankdata(np.concatenate([neg, pos]))
    u_stat = ranks[neg.size :].sum() - pos.size * (pos.size + 1) / 2.0
    return float(u_stat / (pos.size * neg.size))


def refuse_curve(
    mean_probs: ArrayLike,
    y: ArrayLike,
    thresholds: ArrayLike = np.linspace(0.0, 1.0, 21),  # noqa: B008 (read-only default)
) -> dict[str, list[float]]:
    """Accuracy when refusing to predict below a confidence threshold.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        y: Labels (N,).
        thresholds: Confidence thresholds t in [0, 1].

    Returns:
        ``{"threshold", "fraction_kept", "accuracy"}``: per t, the fraction of points with
        ``max_k p_k >= t`` and the accuracy on them (NaN if none is kept). Rows with non-finite
        probabilities are never kept.
    """
    p, labels = _mean_probs_and_labels(mean_probs, y)
    t = _float_array(thresholds, "thresholds", (1,))
    if not np.all((t >= 0) & (t <= 1)):
        raise ValueError(f"thresholds must be in [0, 1], got {t.tolist()}")
    conf, pred = _confidence_and_prediction(p)
    correct = pred == labels
    kept = conf[None, :] >= t[:, None]
    num_kept = kept.sum(axis=1)
    with np.errstate(all="ignore"):
        acc = np.where(num_kept > 0, (kept & correct).sum(axis=1) / num_kept, np.nan)
    return {
        "threshold": t.tolist(),
        "fraction_kept": (num_kept / labels.size).tolist(),
        "accuracy": acc.tolist(),
    }


def classification_metrics(
    probs_draws: ArrayLike,
    y: ArrayLike,
    *,
    ood_probs_draws: ArrayLike | None = None,
    num_bins: int = 15,
) -> dict[str, float]:
    """All classification metrics of the design in one dict.

    Keys: ``accuracy``, ``nll``, ``n_nonfinite_nll``, ``brier``, ``ece`` and ``mean_entropy`` (mean
    predictive entropy); with ``ood_probs_draws``, ``ood_auroc`` (:func:`auroc` of the
    in-distribution entropies as negatives against the OOD entropies as positives) and
    ``ood_mean_entropy``. The predictive is the mean of ``probs_draws`` over draws.

    Args:
        probs_draws: Per-draw class probabilities (S, N, K).
        y: Labels (N,).
        ood_probs_draws: Per-draw class probabilities at out-of-distribution inputs (S', M, K).
        num_bins: ECE bins.
    """
    p = _probs(probs_draws, "probs_draws", 3)
    labels = _labels(y, p.shape[1], p.shape[2])
    bins = _positive_int(num_bins, "num_bins")
    mean_probs = p.mean(axis=0)
    nll_value, num_bad = _finite_mean(_nll_points(p, labels))
    entropy = entr(mean_probs).sum(axis=-1)
    out: dict[str, float] = {
        "accuracy": accuracy(mean_probs, labels),
        "nll": nll_value,
        "n_nonfinite_nll": num_bad,
        "brier": brier(mean_probs, labels),
        "ece": expected_calibration_error(mean_probs, labels, bins),
        "mean_entropy": float(np.mean(entropy)),
    }
    if ood_probs_draws is not None:
        ood = _probs(ood_probs_draws, "ood_probs_draws", 3)
        if ood.shape[2] != p.shape[2]:
            raise ValueError(
                f"ood_probs_draws must have {p.shape[2]} classes (as probs_draws), "
                f"got {ood.shape[2]}"
            )
        ood_entropy = entr(ood.mean(axis=0)).sum(axis=-1)
        out["ood_auroc"] = auroc(entropy, ood_entropy)
        out["ood_mean_entropy"] = float(np.mean(ood_entropy))
    return out


# --- against a reference posterior --------------------------------------------------------------


def _paired_probs(
    mean_probs: ArrayLike, ref_mean_probs: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    p = _probs(mean_probs, "mean_probs", 2)
    q = _probs(ref_mean_probs, "ref_mean_probs", 2)
    if p.shape != q.shape:
        raise ValueError(
            f"mean_probs and ref_mean_probs must have the same shape, got {p.shape} and {q.shape}"
        )
    return p, q


def agreement(mean_probs: ArrayLike, ref_mean_probs: ArrayLike) -> float:
    """Fraction of points where the predictive and the reference pick the same class.

    Izmailov et al. 2021, "What are Bayesian neural network posteriors really like?". A row with
    non-finite probabilities on either side counts as disagreeing.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        ref_mean_probs: Reference predictive class probabilities (N, K).
    """
    p, q = _paired_probs(mean_probs, ref_mean_probs)
    pred, ref_pred = _confidence_and_prediction(p)[1], _confidence_and_prediction(q)[1]
    return float(np.mean((pred == ref_pred) & (pred >= 0)))


def total_variation(mean_probs: ArrayLike, ref_mean_probs: ArrayLike) -> float:
    r"""Mean total variation distance :math:`\frac1N\sum_n \frac12\sum_k |p_{nk} - q_{nk}|`.

    Izmailov et al. 2021. NaN if a probability is non-finite.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        ref_mean_probs: Reference predictive class probabilities (N, K).
    """
    p, q = _paired_probs(mean_probs, ref_mean_probs)
    return float(np.mean(0.5 * np.abs(p - q).sum(axis=1)))


def _reference_regression_inputs(
    f: ArrayLike, sigma: ArrayLike, f_ref: ArrayLike, sigma_ref: ArrayLike
) -> tuple[np.ndarray, ...]:
    f_arr, s_arr = _regression_inputs(f, sigma)
    fr_arr, sr_arr = _regression_inputs(f_ref, sigma_ref, "f_ref", "sigma_ref")
    _same_points(f_arr.shape[1], fr_arr.shape[1], "f", "f_ref")
    return f_arr, s_arr, fr_arr, sr_arr


def _quantile_grid(num_quantiles: int) -> np.ndarray:
    return (np.arange(num_quantiles) + 0.5) / num_quantiles


def _w2_ks(
    f: np.ndarray, s: np.ndarray, fr: np.ndarray, sr: np.ndarray, num_quantiles: int
) -> tuple[float, float]:
    """Mean W2 and KS distances over points between the mixtures (f, s) and (fr, sr)."""
    u = _quantile_grid(num_quantiles)
    q, qr = _quantiles(f, s, u), _quantiles(fr, sr, u)
    w2 = float(np.mean(np.sqrt(np.mean((q - qr) ** 2, axis=0))))
    # At its own quantiles each CDF equals u (up to the solver tolerance): only the other
    # mixture's CDF needs evaluating there.
    cols = np.tile(np.arange(f.shape[1]), num_quantiles)
    ref_at_q = _mixture_at(fr, sr, q.reshape(-1), cols)[0].reshape(q.shape)
    at_ref_q = _mixture_at(f, s, qr.reshape(-1), cols)[0].reshape(q.shape)
    gap = np.concatenate([u[:, None] - ref_at_q, at_ref_q - u[:, None]])
    return w2, float(np.mean(np.max(np.abs(gap), axis=0)))


def mixture_w2(
    f: ArrayLike,
    sigma: ArrayLike,
    f_ref: ArrayLike,
    sigma_ref: ArrayLike,
    num_quantiles: int = 100,
) -> float:
    r"""Mean over points of the Wasserstein-2 distance between two predictive mixtures.

    In one dimension :math:`W_2(F, G)^2 = \int_0^1 (F^{-1}(u) - G^{-1}(u))^2 du`, estimated by the
    midpoint rule at :math:`u_i = (i + 1/2)/M`, i = 0..M-1 (deterministic). The rule leaves out
    the outer tails, so it slightly underestimates (for two Gaussians the std-difference term is
    scaled by :math:`\frac1M\sum_i \Phi^{-1}(u_i)^2 < 1`). Izmailov et al. 2021 compare predictive
    marginals to a reference posterior this way. Cost: about three mixture-CDF evaluations per
    quantile, O((S + S_ref) N M) each; thin long reference runs before calling.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        f_ref: Reference per-draw predictive means (S_ref, N).
        sigma_ref: Reference noise std (S_ref,) or (S_ref, N).
        num_quantiles: M.

    Returns:
        Mean W2 (not squared) over points, in the units of ``f``; NaN if a prediction is
        non-finite.
    """
    arrays = _reference_regression_inputs(f, sigma, f_ref, sigma_ref)
    m = _positive_int(num_quantiles, "num_quantiles")
    u = _quantile_grid(m)
    q, qr = _quantiles(arrays[0], arrays[1], u), _quantiles(arrays[2], arrays[3], u)
    return float(np.mean(np.sqrt(np.mean((q - qr) ** 2, axis=0))))


def mixture_ks(
    f: ArrayLike,
    sigma: ArrayLike,
    f_ref: ArrayLike,
    sigma_ref: ArrayLike,
    num_quantiles: int = 100,
) -> float:
    r"""Mean over points of the Kolmogorov-Smirnov distance between two predictive mixtures.

    :math:`\sup_t |F(t) - G(t)|`, the supremum taken over the union of both mixtures' quantiles at
    :math:`u_i = (i + 1/2)/M` (2M points; a lower bound on the exact supremum).

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        f_ref: Reference per-draw predictive means (S_ref, N).
        sigma_ref: Reference noise std (S_ref,) or (S_ref, N).
        num_quantiles: M.

    Returns:
        Mean KS distance in [0, 1]; NaN if a prediction is non-finite.
    """
    arrays = _reference_regression_inputs(f, sigma, f_ref, sigma_ref)
    return _w2_ks(*arrays, _positive_int(num_quantiles, "num_quantiles"))[1]


def reference_metrics_regression(
    f: ArrayLike, sigma: ArrayLike, f_ref: ArrayLike, sigma_ref: ArrayLike
) -> dict[str, float]:
    """``{"ref_w2", "ref_ks"}``: :func:`mixture_w2` and :func:`mixture_ks` with 100 quantiles."""
    w2, ks = _w2_ks(*_reference_regression_inputs(f, sigma, f_ref, sigma_ref), 100)
    return {"ref_w2": w2, "ref_ks": ks}


def reference_metrics_classification(
    probs_draws: ArrayLike, ref_probs_draws: ArrayLike
) -> dict[str, float]:
    """``{"ref_agreement", "ref_tv"}`` of the draw-averaged predictives (:func:`agreement`,
    :func:`total_variation`).

    Args:
        probs_draws: Per-draw class probabilities (S, N, K).
        ref_probs_draws: Reference per-draw class probabilities (S_ref, N, K).
    """
    p = _probs(probs_draws, "probs_draws", 3)
    q = _probs(ref_probs_draws, "ref_probs_draws", 3)
    if p.shape[1:] != q.shape[1:]:
        raise ValueError(
            "probs_draws and ref_probs_draws must agree in points and classes, got "
            f"{p.shape} and {q.shape}"
        )
    mean_p, mean_q = p.mean(axis=0), q.mean(axis=0)
    return {
        "ref_agreement": agreement(mean_p, mean_q),
        "ref_tv": total_variation(mean_p, mean_q),
    }


# --- MCMC diagnostics and cost ------------------------------------------------------------------


def _nan_reduce(reduce: Callable[[np.ndarray], Any], values: np.ndarray) -> float:
    """``reduce`` over the non-NaN values; NaN if there are none."""
    kept = values[~np.isnan(values)]
    return float(reduce(kept)) if kept.size else math.nan


def prediction_diagnostics(draws: ArrayLike) -> dict[str, float]:
    """R-hat and bulk/tail ESS of a scalar prediction per test point, summarised over points.

    Uses ArviZ's rank-normalised split R-hat (the max of bulk and folded R-hat) and bulk/tail ESS
    (Vehtari et al. 2021, Bayesian Analysis 16(2)). ArviZ returns NaN R-hat for a single chain, so
    one chain is cut into its two halves, treated as two chains (dropping the first draw if the
    count is odd); ArviZ splits them again, so the R-hat compares the four quarters of the chain:
    a check of within-chain stationarity, not of mixing between independent chains. ESS always
    uses the chains as given.

    At most 500 test points are used, at evenly spaced indices, for speed. A point with a
    non-finite draw gets R-hat = inf and is left out of the ESS summaries; a point whose draws are
    all equal has an undefined (NaN) R-hat and is left out of the R-hat summaries.

    Args:
        draws: Predictions (chain, draw, N), e.g. f at the test inputs or the probability of the
            predicted class; at least 4 draws per chain (8 with a single chain).

    Returns:
        ``rhat_max``, ``rhat_median``, ``ess_bulk_min``, ``ess_bulk_median``, ``ess_tail_min``.
    """
    raw = np.asarray(draws)
    if raw.ndim == 3 and raw.shape[2] > _DIAGNOSTIC_MAX_POINTS:
        # Subsample before converting, so that a large float32 array is not copied whole.
        idx = np.round(np.linspace(0, raw.shape[2] - 1, _DIAGNOSTIC_MAX_POINTS)).astype(np.int64)
        raw = raw[:, :, idx]
    d = _float_array(raw, "draws", (3,))
    num_chains, num_draws, _ = d.shape
    min_draws = 4 if num_chains > 1 else 8
    if num_draws < min_draws:
        raise ValueError(
            f"draws needs at least {min_draws} draws per chain with {num_chains} chain(s), "
            f"got shape {d.shape}"
        )
    finite = np.isfinite(d).all(axis=(0, 1))
    rhat = np.full(d.shape[2], np.inf)
    ess_bulk = np.full(d.shape[2], np.nan)
    ess_tail = np.full(d.shape[2], np.nan)
    if finite.any():
        az = import_arviz()
        x = d[:, :, finite]
        halves = x
        if num_chains == 1:
            halves = x[:, num_draws % 2 :].reshape(2, num_draws // 2, x.shape[2])
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            # Constant predictions give 0/0 inside ArviZ's R-hat (NaN result).
            warnings.simplefilter("ignore", RuntimeWarning)
            rhat[finite] = az.rhat(az.convert_to_dataset({"p": halves}))["p"].values
            data = az.convert_to_dataset({"p": x})
            ess_bulk[finite] = az.ess(data, method="bulk")["p"].values
            ess_tail[finite] = az.ess(data, method="tail")["p"].values
    return {
        "rhat_max": _nan_reduce(np.max, rhat),
        "rhat_median": _nan_reduce(np.median, rhat),
        "ess_bulk_min": _nan_reduce(np.min, ess_bulk),
        "ess_bulk_median": _nan_reduce(np.median, ess_bulk),
        "ess_tail_min": _nan_reduce(np.min, ess_tail),
    }


def _stat(sample_stats: Mapping[str, ArrayLike], key: str) -> np.ndarray | None:
    if key not in sample_stats:
        return None
    arr = _float_array(sample_stats[key], f"sample_stats[{key!r}]", (2,))
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
        cap = _positive_int(max_tree_depth, "max_tree_depth")
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


def _nonnegative(value: object, name: str, *, allow_nan: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    x = float(value)
    if math.isnan(x) and allow_nan:
        return x
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return x


def cost_metrics(
    *, seconds: float, ess: float | None = None, num_grads: float | None = None
) -> dict[str, float]:
    """Efficiency: ``ess_per_s``, ``ess_per_1000_grads`` and ``s_per_grad``.

    A key is omitted when its inputs are missing or its denominator (``seconds``, ``num_grads``)
    is 0; ``s_per_grad`` is also omitted for 0 seconds (no time measured). A NaN ``ess`` gives NaN
    rates.

    Args:
        seconds: Wall time of the phase being costed.
        ess: Effective sample size (e.g. the minimum bulk ESS over predictions).
        num_grads: Gradient evaluations.
    """
    secs = _nonnegative(seconds, "seconds")
    ess_v = None if ess is None else _nonnegative(ess, "ess", allow_nan=True)
    grads = None if num_grads is None else _nonnegative(num_grads, "num_grads")
    out: dict[str, float] = {}
    if ess_v is not None and secs > 0:
        out["ess_per_s"] = ess_v / secs
    if ess_v is not None and grads:
        out["ess_per_1000_grads"] = 1000.0 * ess_v / grads
    if grads and secs > 0:
        out["s_per_grad"] = secs / grads
    return out
