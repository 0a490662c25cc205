"""A fit suite's ``[methods.<name>]`` tables (options, per-backend overrides, a tuned contestant's
grid) and its ``[reference]`` table (the reference posteriors' NUTS settings), checked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppl_bnn.bench.schema import (
    SuiteError,
    check_int,
    check_keys,
    check_open_unit,
    check_options,
    check_timeout,
)
from ppl_bnn.bench.tuning import parse_tuning
from ppl_bnn.engine.registry import BACKENDS
from ppl_bnn.methods import available
from ppl_bnn.reference import ReferenceSettings

_REFERENCE_KEYS = {
    "num_chains", "num_warmup", "num_samples", "max_tree_depth", "target_accept", "seed",
    "timeout_s",
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
            elif isinstance(value, dict) and key not in BACKENDS:
                raise SuiteError(
                    f"{where} [methods.{method}]: sub-table {key!r} is not a backend "
                    f"({list(BACKENDS)}) nor tune"
                )
            elif isinstance(value, dict) and "tune" in value:
                raise SuiteError(
                    f"{where} [methods.{method}.{key}]: tune is set for a method on every "
                    f"backend ([methods.{method}.tune]), not per backend"
                )
    return methods


def parse_reference(where: str, table: Any) -> ReferenceSettings | None:
    """The ``[reference]`` table's NUTS settings (defaults for what it leaves out), or None."""
    if table is None:
        return None
    loc = f"{where} [reference]"
    if not isinstance(table, Mapping):
        raise SuiteError(
            f"{loc}: must be a table of NumPyro NUTS settings ({sorted(_REFERENCE_KEYS)}), "
            f"got {table!r}"
        )
    check_keys(loc, table, _REFERENCE_KEYS)
    default = ReferenceSettings()
    settings = ReferenceSettings(
        num_chains=check_int(loc, table, "num_chains", default.num_chains, minimum=1),
        num_warmup=check_int(loc, table, "num_warmup", default.num_warmup),
        # The convergence gate's R-hat needs at least 4 draws per chain.
        num_samples=check_int(loc, table, "num_samples", default.num_samples, minimum=4),
        max_tree_depth=check_int(loc, table, "max_tree_depth", default.max_tree_depth, minimum=1),
        target_accept=check_open_unit(loc, table, "target_accept", default.target_accept),
        seed=check_int(loc, table, "seed", default.seed),
        timeout_s=check_timeout(loc, table, default.timeout_s),
    )
    check_options(loc, "nuts", "numpyro", settings.nuts_options())
    return settings
