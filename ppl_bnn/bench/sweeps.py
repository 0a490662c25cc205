"""A dataset's study (``sweep`` in a suite): one method fitted once per value of one option,
shown apart from the contestants (see :mod:`ppl_bnn.bench.suite`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ppl_bnn.bench.schema import SuiteError, check_keys, check_list

_SWEEP_KEYS = {"method", "option", "values"}


@dataclass(frozen=True)
class Sweep:
    """A study on one dataset: ``method`` fitted once per value of its option ``option``."""

    method: str
    option: str
    values: tuple[float, ...]


def parse_sweep(
    loc: str,
    raw: Any,
    methods: Mapping[str, Any],
    exclude: list[str],
    options: Mapping[str, Any],
) -> Sweep | None:
    """A dataset's ``sweep`` table: a method of the suite, an option name and distinct finite
    numbers (they join the cell ids); the dataset's ``exclude`` and ``options`` may name only
    that method, and not set the swept option. Each value is checked by the method's options
    class with the rest of the suite."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SuiteError(
            f'{loc}: must be a table such as {{ method = "svi", option = "kl_weight", '
            f"values = [1.0, 0.1] }}, got {raw!r}"
        )
    check_keys(loc, raw, _SWEEP_KEYS)
    missing = sorted(_SWEEP_KEYS - set(raw))
    if missing:
        raise SuiteError(f"{loc}: missing keys {missing}")
    method, option = raw["method"], raw["option"]
    if not isinstance(method, str) or method not in methods:
        raise SuiteError(f"{loc}: method {method!r} is no method of this suite ({list(methods)})")
    if not isinstance(option, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", option):
        raise SuiteError(
            f"{loc}: option must be an option name (lower-case letters, digits and "
            f"underscores: it joins the cell ids), got {option!r}"
        )
    values = check_list(loc, raw, "values", ())
    if not values or any(
        isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
        for v in values
    ):
        raise SuiteError(
            f"{loc}: values must be a non-empty list of finite numbers (they join the cell "
            f"ids), got {values!r}"
        )
    others = sorted(k for k in [*exclude, *options] if k.partition(".")[0] != method)
    if others:
        raise SuiteError(
            f"{loc}: a sweep fits {method!r} alone, so exclude and options may name only "
            f"{method!r} (options) and {method}.<backend>; got {others}"
        )
    if method in exclude:
        raise SuiteError(
            f"{loc}: exclude names the swept method {method!r} itself; exclude a backend "
            f"({method}.<backend>) or drop the sweep"
        )
    setting = sorted(k for k, table in options.items() if option in table)
    if setting:
        raise SuiteError(
            f"{loc}: options {setting} set {option!r}, which the sweep sets to each of its values"
        )
    return Sweep(method=method, option=option, values=tuple(values))
