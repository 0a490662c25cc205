"""What suite files of every kind share: the error they raise and the checks of their tables.

Both :mod:`ppl_bnn.bench.suite` (fit suites) and :mod:`ppl_bnn.bench.perf_suite` (performance
suites) validate with these, so a bad file gets the same kind of message whichever it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppl_bnn.methods import get_method, make_options


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file and the problem."""


def check_keys(where: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    """``SuiteError`` naming the keys of ``table`` that are not in ``allowed``."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown keys {unknown}; allowed: {sorted(allowed)}")


def check_timeout(where: str, raw: Mapping[str, Any], default: float = 600) -> float:
    """``raw``'s ``timeout_s`` (else ``default`` seconds), which must be a positive number."""
    timeout = raw.get("timeout_s", default)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise SuiteError(f"{where}: timeout_s must be a positive number, got {timeout!r}")
    return float(timeout)


def check_int(
    where: str, raw: Mapping[str, Any], key: str, default: int, *, minimum: int = 0
) -> int:
    """``raw[key]`` (else ``default``), which must be an integer >= ``minimum``."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SuiteError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def check_open_unit(where: str, raw: Mapping[str, Any], key: str, default: float) -> float:
    """``raw[key]`` (else ``default``), which must be a number strictly between 0 and 1."""
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise SuiteError(f"{where}: {key} must be a number in (0, 1), got {value!r}")
    return float(value)


def check_text(where: str, raw: Mapping[str, Any], key: str) -> str | None:
    """``raw[key]``, which must be a non-empty string, or None when absent."""
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise SuiteError(f"{where}: {key} must be a non-empty string, got {value!r}")
    return value


def check_options(where: str, method: str, backend: str, options: dict[str, Any]) -> None:
    """``SuiteError`` unless ``method`` runs on ``backend`` and accepts every one of ``options``
    (checked when the suite is read, not in a worker)."""
    try:
        make_options(get_method(method, backend), options)
    except (TypeError, ValueError) as err:
        raise SuiteError(f"{where}: {err}") from err
