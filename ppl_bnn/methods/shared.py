"""Shared runs: where a run of a method marked ``shared`` (:attr:`ppl_bnn.methods.base.Method.
shared`, MAP's mode, which the GGN Laplace and others start from) may be taken from elsewhere.

The core only offers the place: inside :func:`intercept`, such a run goes through the given
:data:`Interceptor`, which may run it, or return an earlier run of the same inputs and say so
with :func:`record_reused`. Outside, it runs. The benchmark harness keeps its content-addressed
store of runs there (:mod:`ppl_bnn.bench.fit_store`). ``fit`` counts what producing the runs it
was handed cost (:func:`collect`), so that a contestant's cost includes each of its parts.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

#: A method's run function, ``(name, target, options, seed) -> RunOutput``.
RunFunction = Callable[[str, Any, Any, int], Any]
#: ``(method, run, name, target, options, seed) -> RunOutput``: how a shared run is made.
Interceptor = Callable[[str, RunFunction, str, Any, Any, int], Any]

_interceptor: contextvars.ContextVar[Interceptor | None] = contextvars.ContextVar(
    "shared_interceptor", default=None
)
_reused: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "shared_reused", default=None
)


@contextlib.contextmanager
def intercept(interceptor: Interceptor | None) -> Iterator[None]:
    """Shared runs go through ``interceptor`` inside the block (None: they run)."""
    token = _interceptor.set(interceptor)
    try:
        yield
    finally:
        _interceptor.reset(token)


@contextlib.contextmanager
def collect() -> Iterator[list[dict[str, Any]]]:
    """The runs an interceptor handed back inside the block, as :func:`record_reused` gave
    them (``{"key", "method", "seconds"}``, ``seconds`` the producing run's wall time); an
    enclosing block gets them too."""
    outer = _reused.get()
    read: list[dict[str, Any]] = []
    token = _reused.set(read)
    try:
        yield read
    finally:
        _reused.reset(token)
        if outer is not None:
            outer.extend(read)


def record_reused(run: dict[str, Any]) -> None:
    """Note, for the enclosing :func:`collect`, a run handed back instead of made."""
    read = _reused.get()
    if read is not None:
        read.append(run)


def stored(method: str, run: RunFunction) -> RunFunction:
    """``run`` through the interceptor in force when it is called; ``run`` itself where none
    is."""

    def run_shared(name: str, target: Any, options: Any, seed: int) -> Any:
        interceptor = _interceptor.get()
        if interceptor is None:
            return run(name, target, options, seed)
        return interceptor(method, run, name, target, options, seed)

    return run_shared
