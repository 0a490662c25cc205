"""Cost of an inference run: effective samples per second and per gradient evaluation."""

from __future__ import annotations

import math
from numbers import Real


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
