"""Input validation shared by the metrics.

Invalid input (inconsistent shapes, NaN targets, ``sigma <= 0``, probabilities outside [0, 1] or
not summing to one, levels outside (0, 1), ``num_bins < 1``, ...) raises ``ValueError`` naming the
argument. Non-finite predictions are let through: :func:`finite_mean` averages over the finite
values and counts the others.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike

# Probabilities must sum to one within this tolerance.
_PROB_SUM_ATOL = 1e-6


def float_array(x: ArrayLike, name: str, ndims: tuple[int, ...]) -> np.ndarray:
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


def regression_inputs(
    f: ArrayLike, sigma: ArrayLike, f_name: str = "f", sigma_name: str = "sigma"
) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``f`` (S, N) and ``sigma`` broadcast to (S, N)."""
    f_arr = float_array(f, f_name, (2,))
    num_draws, num_points = f_arr.shape
    s_arr = float_array(sigma, sigma_name, (1, 2))
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


def targets(y: ArrayLike, num_points: int, name: str = "y") -> np.ndarray:
    """Validated regression targets (N,)."""
    y_arr = float_array(y, name, (1,))
    if y_arr.shape[0] != num_points:
        raise ValueError(
            f"{name} must have length {num_points} (the number of points), got {y_arr.shape[0]}"
        )
    if np.isnan(y_arr).any():
        raise ValueError(f"{name} contains NaN")
    if np.isinf(y_arr).any():
        raise ValueError(f"{name} contains inf")
    return y_arr


def probs(p: ArrayLike, name: str, ndim: int) -> np.ndarray:
    """Validated probabilities, classes on the last axis; non-finite entries are let through."""
    arr = float_array(p, name, (ndim,))
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


def labels(y: ArrayLike, num_points: int, num_classes: int, name: str = "y") -> np.ndarray:
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


def open_unit(values: ArrayLike, name: str) -> np.ndarray:
    """Validated 1-D array of numbers strictly inside (0, 1)."""
    arr = float_array(values, name, (1,))
    if not np.all((arr > 0) & (arr < 1)):
        raise ValueError(f"{name} must be in (0, 1), got {arr.tolist()}")
    return arr


def positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def same_points(n: int, n_ref: int, name: str, ref_name: str) -> None:
    if n != n_ref:
        raise ValueError(
            f"{name} and {ref_name} must have the same number of points, got {n} and {n_ref}"
        )


def finite_mean(values: np.ndarray) -> tuple[float, int]:
    """Mean over the finite values and the number of non-finite ones (NaN mean if none finite)."""
    finite = np.isfinite(values)
    num_bad = int(values.size - finite.sum())
    if num_bad == values.size:
        return math.nan, num_bad
    return float(np.mean(values[finite])), num_bad
