"""Validation of user data and parameters, with errors that name the array and the problem."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ppl_bnn.model.spec import BNNSpec, check_likelihood_name

#: Largest number of classes inferred from labels (a guard against mistaken float targets).
MAX_CLASSES = 100_000
#: Largest magnitude of a Gaussian target: beyond it a squared residual over a noise std as small
#: as 1e-3 overflows float32 (whose square root of the largest value is 1.8e19), and the log
#: density is -inf wherever a sampler or optimiser starts.
MAX_TARGET = 1e16


def _check_numeric(arr: np.ndarray, name: str) -> None:
    """``ValueError`` naming ``name`` unless ``arr`` holds real numbers (or booleans)."""
    if arr.dtype.kind in "mM":
        raise ValueError(
            f"{name} has dtype {arr.dtype}: dates and durations are not numbers the model can "
            "use; convert them to floats first (e.g. seconds since a reference time)"
        )
    if arr.dtype.kind == "c":
        raise ValueError(
            f"{name} is complex (dtype {arr.dtype}): the model takes real numbers; pass the real "
            "and imaginary parts (or the magnitude) as real features"
        )
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array, got dtype {arr.dtype}")


def check_inputs(
    x: object, input_shape: int | tuple[int, ...] | None = None, name: str = "x"
) -> np.ndarray:
    """``x`` as a finite float32 array: flat (N, D) or images (N, H, W, C), channels last.

    ``input_shape``: one example's shape the model was built for (an int D for flat inputs);
    ``ValueError`` naming the problem when ``x`` does not fit it.
    """
    arr = np.asarray(x)
    _check_numeric(arr, name)
    if arr.ndim not in (2, 4):
        hint = ""
        if arr.ndim == 3:
            hint = f"; single-channel images (N, H, W) need a channel axis: {name}[..., None]"
        raise ValueError(
            f"{name} must be 2-dimensional (N, D), got shape {arr.shape}; images must be "
            f"4-dimensional (N, H, W, C){hint}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    if input_shape is not None:
        expected = (input_shape,) if isinstance(input_shape, int) else tuple(input_shape)
        if arr.shape[1:] != expected:
            if arr.ndim == 2 and len(expected) == 1:
                raise ValueError(
                    f"{name} has {arr.shape[1]} features but the model was built with {expected[0]}"
                )
            raise ValueError(
                f"{name} has examples of shape {arr.shape[1:]} but the model was built for "
                f"examples of shape {expected}"
            )
    finite = np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)
    if not finite.all():
        raise ValueError(
            f"{name} contains non-finite values (NaN or inf) in {int(np.sum(~finite))} row(s)"
        )
    _check_float32_range(arr, name)
    return arr.astype(np.float32)


def _check_float32_range(arr: np.ndarray, name: str) -> None:
    limit = np.finfo(np.float32).max
    if arr.size and np.max(np.abs(arr)) > limit:
        raise ValueError(f"{name} has values beyond the float32 range (|value| > {limit:.3g})")


def check_targets(
    y: object, n: int, likelihood: str, num_classes: int | None = None, name: str = "y"
) -> np.ndarray:
    """``y`` as float32 (regression) or int64 labels 0..K-1 (classification), length ``n``."""
    check_likelihood_name(likelihood)
    arr = np.asarray(y)
    _check_numeric(arr, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional (N,), got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but x has {n} rows")
    if likelihood == "gaussian":
        if not np.all(np.isfinite(arr)):
            raise ValueError(
                f"{name} contains {int(np.sum(~np.isfinite(arr)))} non-finite value(s)"
            )
        _check_float32_range(arr, name)
        largest = float(np.max(np.abs(arr)))
        if largest > MAX_TARGET:
            raise ValueError(
                f"{name} has values of magnitude up to {largest:.1e}: too large for the Gaussian "
                f"likelihood (|{name}| must stay below {MAX_TARGET:.0e}, or its squared residuals "
                "overflow float32 and the log density is -inf everywhere); standardise the "
                f"targets first, e.g. ({name} - {name}.mean()) / {name}.std()"
            )
        return arr.astype(np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite labels")
    if not np.issubdtype(arr.dtype, np.integer) and np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold integer class labels 0..K-1, found non-integers")
    # Range checks on the original values, before any cast can overflow.
    if arr.min() < 0:
        raise ValueError(f"{name} must hold class labels 0..K-1, found {arr.min()}")
    upper = num_classes if num_classes is not None else MAX_CLASSES
    if arr.max() >= upper:
        raise ValueError(
            f"{name} has label {arr.max()} but the model allows classes 0..{upper - 1}"
        )
    return arr.astype(np.int64)


def check_params(spec: BNNSpec, params: Mapping[str, object]) -> dict[str, np.ndarray]:
    """``params`` checked against the spec's sites (names, shapes, finiteness, support)."""
    sites = {s.name: s for s in spec.sites()}
    missing = sorted(set(sites) - set(params))
    extra = sorted(set(params) - set(sites))
    if missing or extra:
        raise ValueError(
            f"params must have exactly the sites {sorted(sites)}; "
            f"missing {missing}, unexpected {extra}"
        )
    out = {}
    for name, site in sites.items():
        arr = np.asarray(params[name], dtype=np.float32)
        if arr.shape != site.shape:
            raise ValueError(f"params[{name!r}] has shape {arr.shape}, expected {site.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"params[{name!r}] contains non-finite values")
        if site.positive and np.any(arr <= 0):
            raise ValueError(f"params[{name!r}] must be > 0")
        out[name] = arr
    return out
