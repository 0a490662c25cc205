"""Wall-clock timing with compilation measured apart from running.

JAX reports every trace, lowering and backend compilation through :mod:`jax.monitoring`;
:class:`CompileClock` collects those events as time intervals so that a phase's compile time can be
subtracted from its wall time. Nested events (a jit traced inside another) are merged, never counted
twice.
"""

from __future__ import annotations

import time
from types import TracebackType

_JAX_COMPILE_EVENTS = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)


def union_length(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Total length of the union of ``intervals`` clipped to ``[start, end]``."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    total, cursor = 0.0, start
    for a, b in clipped:
        a = max(a, cursor)
        if b > a:
            total += b - a
            cursor = b
    return total


class CompileClock:
    """Context manager recording JAX compilation intervals while it is active.

    Example:
        >>> with CompileClock() as clock:
        ...     t0 = time.perf_counter()
        ...     ...  # jitted work
        ...     t1 = time.perf_counter()
        >>> clock.compile_seconds(t0, t1)  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.intervals: list[tuple[float, float]] = []

    def _listener(self, event: str, duration: float, **_: object) -> None:
        if event in _JAX_COMPILE_EVENTS:
            now = time.perf_counter()
            self.intervals.append((now - duration, now))

    def __enter__(self) -> CompileClock:
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        import jax.monitoring

        jax.monitoring.unregister_event_duration_listener(self._listener)

    def compile_seconds(self, start: float, end: float) -> float:
        """Seconds spent compiling between ``start`` and ``end`` (``time.perf_counter`` values)."""
        return union_length(self.intervals, start, end)


def now() -> float:
    return time.perf_counter()
