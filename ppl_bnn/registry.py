"""Which (method, backend) pairs exist, and the runner for each.

Method modules register themselves with :func:`register`; :func:`get_method` finds one or raises an
error that lists what exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from ppl_bnn.backends import BACKENDS


@dataclass(frozen=True)
class MethodEntry:
    """A registered method: its options class and one runner per backend."""

    name: str
    options: type
    runners: dict[str, Callable[..., Any]]


_METHODS: dict[str, MethodEntry] = {}

#: Methods whose draws come from Markov chains (convergence diagnostics and ESS apply).
MARKOV_CHAIN_METHODS = ("nuts", "hmc", "sgld", "sghmc")


def register(name: str, options: type, runners: dict[str, Callable[..., Any]]) -> None:
    """Register method ``name`` with its options dataclass and ``{backend: runner}``."""
    unknown = set(runners) - set(BACKENDS)
    if unknown:
        raise ValueError(f"runners for unknown backends {sorted(unknown)}")
    _METHODS[name] = MethodEntry(name=name, options=options, runners=dict(runners))


def available() -> dict[str, tuple[str, ...]]:
    """``{method: backends}`` for every registered method."""
    _load_methods()
    return {name: tuple(entry.runners) for name, entry in sorted(_METHODS.items())}


def get_method(name: str, backend: str) -> MethodEntry:
    """The entry for ``name``, checked to have a runner for ``backend``."""
    _load_methods()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
    if name not in _METHODS:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(sorted(_METHODS))}")
    entry = _METHODS[name]
    if backend not in entry.runners:
        raise ValueError(
            f"method {name!r} is not available on backend {backend!r}; "
            f"it runs on: {', '.join(entry.runners)}"
        )
    return entry


def make_options(entry: MethodEntry, options: dict[str, Any]) -> Any:
    """Build ``entry``'s options dataclass; unknown names raise an error listing valid ones."""
    valid = [f.name for f in fields(entry.options) if f.init]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for method {entry.name!r}; "
            f"valid options: {', '.join(valid)}"
        )
    return entry.options(**options)


def _load_methods() -> None:
    # Importing the package registers every method module.
    import ppl_bnn.methods  # noqa: F401
