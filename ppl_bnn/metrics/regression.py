r"""Regression metrics of Gaussian-mixture posterior predictives.

Shapes: ``f`` (S, N) per-draw network outputs, ``sigma`` (S,) or (S, N) per-draw noise std,
``y`` (N,). The predictive of point n is the mixture
:math:`p_n = \frac1S \sum_s \mathcal N(f_{sn}, \sigma_{sn}^2)`.

Non-finite predictions are not an error: the test log-likelihood averages over the finite points
and counts the others; the other metrics say per function what they do (mostly: the result is
NaN).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp, ndtr, ndtri

from ppl_bnn.devices import host_threads
from ppl_bnn.metrics import checks

# Largest number of elements of a temporary array in the chunked computations (32 MiB of float64).
_CHUNK = 1 << 22
# Fewest elements (draws x evaluations) worth spreading over threads.
_THREADED_ELEMENTS = 1 << 18
# Draws used by the O(S^2) pairwise term of the CRPS.
_PAIRWISE_MAX_DRAWS = 256
# Quantile solver: relative tolerance, bracket half-width in component stds, iteration cap.
_QUANTILE_RTOL = 1e-8
_BRACKET_STDS = 10.0
_QUANTILE_MAX_ITER = 200

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def rmse(mean: ArrayLike, y: ArrayLike) -> float:
    r"""Root mean squared error :math:`\sqrt{\frac1N\sum_n (\bar f_n - y_n)^2}`.

    Args:
        mean: Predictive means (N,). Non-finite values give a non-finite result.
        y: Targets (N,).
    """
    mean_arr = checks.float_array(mean, "mean", (1,))
    y_arr = checks.targets(y, mean_arr.shape[0])
    with np.errstate(all="ignore"):
        return float(np.sqrt(np.mean((mean_arr - y_arr) ** 2)))


def _pointwise_ll(f: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        z = (y[None, :] - f) / s
        log_p = -0.5 * z * z - np.log(s) - _LOG_SQRT_2PI
        return logsumexp(log_p, axis=0) - math.log(f.shape[0])


def log_predictive_density(f: ArrayLike, sigma: ArrayLike, y: ArrayLike) -> np.ndarray:
    r"""Log predictive density per point, :math:`\log \frac1S \sum_s \mathcal N(y_n \mid f_{sn},
    \sigma_{sn}^2)`, by log-sum-exp over draws (never clipped).

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        y: Targets (N,).

    Returns:
        (N,) values; a point where a draw's output is NaN gets NaN.
    """
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    y_arr = checks.targets(y, f_arr.shape[1])
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
    return checks.finite_mean(log_predictive_density(f, sigma, y))


# Not a test: pytest would otherwise collect this function when a test module imports it.
test_log_likelihood.__test__ = False  # type: ignore[attr-defined]


def _column_parts(num_columns: int, step: int, pieces: int) -> list[slice]:
    """Chunks of at most ``step`` columns, each cut into at most ``pieces`` parts of at least two
    columns: a mean over the draws of one column alone is summed pairwise, of two or more in
    draw order, so that the parts give the bits the whole chunk gives."""
    parts = []
    for start in range(0, num_columns, step):
        stop = min(start + step, num_columns)
        count = max(1, min(pieces, (stop - start) // 2))
        edges = np.linspace(start, stop, count + 1).round().astype(int)
        parts += [slice(int(a), int(b)) for a, b in itertools.pairwise(edges)]
    return parts


def _mixture_at(
    f: np.ndarray,
    s: np.ndarray,
    x: np.ndarray,
    cols: np.ndarray,
    sign: np.ndarray | None = None,
    *,
    derivatives: bool = False,
) -> tuple[np.ndarray, ...]:
    """Mixture CDF of point ``cols[a]`` at ``x[a]`` (and its first two derivatives), chunked, the
    chunks spread over the host's threads (:func:`~ppl_bnn.devices.host_threads`; numpy's loops
    release the GIL), with the same result on any number of them.

    Where ``sign[a] = -1`` the mixture of ``-X`` is used: its lower tail is the upper tail of
    ``X``, computed without the cancellation in ``1 - F``.

    Returns:
        ``(cdf,)`` or ``(cdf, pdf, pdf')``, each shaped like ``x``.
    """
    num_draws = f.shape[0]
    outs = [np.empty(x.shape[0]) for _ in range(3 if derivatives else 1)]
    # sigma broadcast from (S,) (stride 0 over points) needs no gathering.
    per_draw_sd = s.strides[1] == 0 or s.shape[1] == 1

    def evaluate(part: slice) -> None:
        with np.errstate(all="ignore"):
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

    threads = host_threads() if x.shape[0] * num_draws >= _THREADED_ELEMENTS else 1
    # One thread takes the chunks whole; several, two parts each (the last ones even out).
    parts = _column_parts(
        x.shape[0], max(1, _CHUNK // num_draws), 2 * threads if threads > 1 else 1
    )
    if threads > 1 and len(parts) > 1:
        with ThreadPoolExecutor(min(threads, len(parts))) as pool:
            list(pool.map(evaluate, parts))
    else:
        for part in parts:
            evaluate(part)
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
    f_arr, s_arr = checks.regression_inputs(f, sigma)
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
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    return _quantiles(f_arr, s_arr, checks.open_unit(probs, "probs"))


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
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    y_arr = checks.targets(y, f_arr.shape[1])
    lv = checks.open_unit(levels, "levels")
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
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    y_arr = checks.targets(y, f_arr.shape[1])
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
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    y_arr = checks.targets(y, f_arr.shape[1])
    lv = checks.open_unit(levels, "levels")
    keys = _coverage_keys(lv)
    covered = _coverage(f_arr, s_arr, y_arr, lv)
    lower, upper = _central_intervals(f_arr, s_arr, np.array([0.95]))
    test_ll, num_bad = checks.finite_mean(_pointwise_ll(f_arr, s_arr, y_arr))
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
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    y_arr = checks.targets(y, f_arr.shape[1])
    lv = checks.open_unit(levels, "levels")
    return {
        "nominal": lv.tolist(),
        "empirical": _coverage(f_arr, s_arr, y_arr, lv).tolist(),
    }
