"""A fit suite's ``[methods.<name>]`` tables (options, per-backend overrides, a tuned contestant's
grid) and its ``[reference]`` table (how the reference posteriors' chain ensembles are sampled),
and its ``[margins]`` table (how close counts as "as good"), checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ppl_bnn.bench.schema import (
    SuiteError,
    check_int,
    check_keys,
    check_open_unit,
    check_options,
    check_positive_number,
    check_timeout,
)
from ppl_bnn.bench.tuning import parse_tuning
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods import available
from ppl_bnn.reference import ENGINES, REFERENCE_BACKEND, ReferenceSettings
from ppl_bnn.reference.chains import MIN_CHAINS
from ppl_bnn.report.equivalence import Margins

_REFERENCE_KEYS = {f.name for f in fields(ReferenceSettings)}
#: The integer settings and their least values (per-chain diagnostics need 8 draws a chain).
_REFERENCE_INTS = {
    "num_chains": MIN_CHAINS, "chains_per_batch": 1, "num_warmup": 0, "num_samples": 8,
    "thinning": 1, "max_tree_depth": 1, "seed": 0,
}  # fmt: skip


def parse_methods(where: str, raw: Any) -> dict[str, dict[str, Any]]:
    """The ``[methods.<name>]`` tables: known methods, sub-tables only for backends."""
    if not isinstance(raw, Mapping):
        raise SuiteError(f"{where}: methods must be a table of [methods.<name>] tables")
    known_methods = available()
    methods: dict[str, dict[str, Any]] = {}
    for method, table in raw.items():
        if method not in known_methods:
            raise SuiteError(
                f"{where}: unknown method {method!r}; available: {sorted(known_methods)}"
            )
        if not isinstance(table, Mapping):
            raise SuiteError(f"{where} [methods.{method}]: must be a table of options")
        methods[method] = dict(table)
        for key, value in table.items():
            if key == "tune":
                parse_tuning(f"{where} [methods.{method}.tune]", value, method)
            elif isinstance(value, dict) and key not in backend_names():
                raise SuiteError(
                    f"{where} [methods.{method}]: sub-table {key!r} is not a backend "
                    f"({list(backend_names())}) nor tune"
                )
            elif isinstance(value, dict) and "tune" in value:
                raise SuiteError(
                    f"{where} [methods.{method}.{key}]: tune is set for a method on every "
                    f"backend ([methods.{method}.tune]), not per backend"
                )
    return methods


def parse_reference(where: str, table: Any) -> ReferenceSettings | None:
    """The ``[reference]`` table's settings of the chain ensemble (defaults for what it leaves
    out; :class:`~ppl_bnn.reference.ReferenceSettings`), or None."""
    if table is None:
        return None
    loc = f"{where} [reference]"
    if not isinstance(table, Mapping):
        raise SuiteError(
            f"{loc}: must be a table of reference settings ({sorted(_REFERENCE_KEYS)}), got "
            f"{table!r}"
        )
    check_keys(loc, table, _REFERENCE_KEYS)
    for key, minimum in _REFERENCE_INTS.items():
        if key in table:
            check_int(loc, table, key, 0, minimum=minimum)
    for key in ("target_floor", "max_seconds"):
        if key in table:
            check_positive_number(loc, table, key)
    if "target_accept" in table:
        check_open_unit(loc, table, "target_accept", 0.8)
    if "engine" in table and not isinstance(table["engine"], str):
        raise SuiteError(f"{loc}: engine must be one of {list(ENGINES)}, got {table['engine']!r}")
    try:
        settings = ReferenceSettings(**{**table, "timeout_s": check_timeout(loc, table, 1800.0)})
    except ValueError as err:
        raise SuiteError(f"{loc}: {err}") from err
    check_options(loc, settings.engine, REFERENCE_BACKEND, settings.engine_options())
    return settings


def parse_margins(where: str, table: Any) -> Margins:
    """The ``[margins]`` table (:class:`~ppl_bnn.report.equivalence.Margins`; its defaults for
    what it leaves out)."""
    loc = f"{where} [margins]"
    if table is not None and not isinstance(table, Mapping):
        raise SuiteError(
            f"{loc}: must be a table of fidelity_ratio and test_ll_nats, got {table!r}"
        )
    for key, value in (table or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SuiteError(f"{loc}: {key} must be a number, got {value!r}")
    try:
        return Margins.of(None if table is None else dict(table))
    except ValueError as err:
        raise SuiteError(f"{loc}: {err}") from err
