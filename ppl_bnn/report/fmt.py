"""Number formatting: a few significant digits, mean ± standard error to matching decimals."""

from __future__ import annotations

import math


def _finite(value: object) -> float | None:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def number(value: object, sig: int = 3) -> str:
    """``value`` to ``sig`` significant digits; integers stay whole; "" for missing/NaN.

    >>> number(0.012345), number(1234.5), number(3.0), number(2.5e-7)
    ('0.0123', '1234', '3', '2.50e-07')
    """
    x = _finite(value)
    if x is None:
        return "" if value is None or (isinstance(value, float) and math.isnan(value)) else "inf"
    if x == 0:
        return "0"
    if x == int(x) and abs(x) < 1e7:
        return str(int(x))
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= 7 or magnitude < -4:
        return f"{x:.{sig - 1}e}"
    decimals = max(0, sig - 1 - magnitude)
    return f"{x:.{decimals}f}"


def mean_se(mean: object, se: object, sig: int = 3) -> str:
    """``mean ± se``, both rounded at the second significant digit of ``se``.

    With no standard error (one value) the mean alone, to ``sig`` significant digits.

    >>> mean_se(0.123456, 0.00412), mean_se(-2.5, None), mean_se(12.0, 0.0)
    ('0.1235 ± 0.0041', '-2.50', '12 ± 0')
    """
    m = _finite(mean)
    if m is None:
        return number(mean, sig)
    s = _finite(se)
    if s is None:
        return number(m, sig)
    if s <= 1e-9 * abs(m) or s == 0:
        # Identical values up to float round-off.
        return f"{number(m, sig)} ± 0"
    decimals = max(0, 1 - _mag(s))
    if decimals > 6 or abs(m) >= 1e7:
        return f"{m:.{sig - 1}e} ± {s:.1e}"
    return f"{m:.{decimals}f} ± {s:.{decimals}f}"


def _mag(x: float) -> int:
    return math.floor(math.log10(abs(x))) if x != 0 else 0


def ratio(value: object) -> str:
    """A ratio such as ``12.3x`` (with a multiplication sign)."""
    x = _finite(value)
    return "" if x is None else f"{number(x, 3)}\u00d7"


#: What a distance within its reference's floor reads: the reference cannot tell it from itself.
INDISTINGUISHABLE = "indistinguishable from the reference"


def against_floor(ratio: object) -> str:
    """A distance to the reference over the reference's floor, in words: ``"2.4\u00d7 the
    floor"`` (two significant digits, three below 1.1), or :data:`INDISTINGUISHABLE` at most 1;
    "" for missing/NaN.

    >>> against_floor(0.7), against_floor(None)
    ('indistinguishable from the reference', '')
    """
    x = _finite(ratio)
    if x is None:
        return ""
    if x <= 1:
        return INDISTINGUISHABLE
    return f"{number(x, 2 if x >= 1.1 else 3)}\u00d7 the floor"


def capital(text: str) -> str:
    """``text`` with its first letter upper case (the rest as it is, unlike ``str.capitalize``).

    >>> capital("the reference failed (split 0: WorkerCrashed)")
    'The reference failed (split 0: WorkerCrashed)'
    """
    return text[:1].upper() + text[1:]


def first_line(text: str | None) -> str:
    """The first non-empty line of ``text`` ("" for None)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
