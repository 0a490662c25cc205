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


def check_timeout(where: str, raw: Mapping[str, Any]) -> float:
    """The suite's ``timeout_s`` (default 600 s), which must be a positive number."""
    timeout = raw.get("timeout_s", 600)
    if not isinstance(timeout, int | float) or timeout <= 0:
        raise SuiteError(f"{where}: timeout_s must be a positive number, got {timeout!r}")
    return float(timeout)


def check_options(where: str, method: str, backend: str, options: dict[str, Any]) -> None:
    """``SuiteError`` unless ``method`` runs on ``backend`` and accepts every one of ``options``
    (checked when the suite is read, not in a worker)."""
    try:
        make_options(get_method(method, backend), options)
    except (TypeError, ValueError) as err:
        raise SuiteError(f"{where}: {err}") from err
