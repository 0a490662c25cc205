"""The report of a sweep still running, kept current as its cells finish.

:class:`LiveReport` re-renders the results folder's report in a separate, lower-priority process
(``python -m ppl_bnn.report.live RESULTS_DIR``), so that the sweep's cells keep the cores and a
render that fails never touches the sweep. It renders as soon as the first cells of a dataset are
in, and otherwise when the last render ended at least ``max(min_interval_s, 4 x its duration)``
ago, so that rendering takes a bounded share of the machine however large the report grows.
While the sweep runs, the page says how many cells are done and names the pending ones
(:func:`ppl_bnn.report.load.sweep_progress`) and leaves the PSIS-LOO comparison, a third of a
render's CPU, for the render after the sweep, which is the same as ``ppl-bnn report``'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: Niceness of the render process: below the cells, which keep the cores.
NICENESS = 10
#: Share of the time a render may take: after a render of d seconds, the next waits 4 d.
SPACING = 4.0


class LiveReport:
    """Renders ``results_dir``'s report in the background while a sweep runs.

    Args:
        results_dir: The sweep's results folder.
        min_interval_s: Least time between the end of a render and the start of the next,
            except for a dataset's first cells.
    """

    def __init__(self, results_dir: str | Path, *, min_interval_s: float = 60.0) -> None:
        self.results_dir = Path(results_dir)
        self.min_interval_s = min_interval_s
        self.renders = 0
        self._proc: subprocess.Popen | None = None
        self._started = 0.0
        self._ended: float | None = None
        self._duration = 0.0
        self._seen: set[str] = set()
        self._new_dataset = False

    @property
    def running(self) -> bool:
        """Whether a render is running now."""
        return self._proc is not None and self._proc.poll() is None

    def update(self, datasets: Iterable[str] = ()) -> None:
        """Cells of ``datasets`` have finished: render now if it is due (see the module
        docstring) and no render is running."""
        fresh = set(datasets) - self._seen
        self._seen |= fresh
        self._new_dataset = self._new_dataset or bool(fresh)
        if self._proc is not None:
            if self._proc.poll() is None:
                return
            self._ended, self._duration = now(), now() - self._started
            self._proc = None
        wait = max(self.min_interval_s, SPACING * self._duration)
        if self._new_dataset or self._ended is None or now() - self._ended >= wait:
            self._start()

    def _start(self) -> None:
        self._new_dataset = False
        self._started = now()
        self.renders += 1
        command = [sys.executable, "-m", __name__, str(self.results_dir)]
        self._proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    def close(self) -> None:
        """Stop a render still running, and the process it started (the sweep's final render
        replaces it)."""
        if self._proc is not None and self._proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self._proc.wait()
        self._proc = None

    def _signal(self, number: int) -> None:
        """Send ``number`` to the render's process group (its own session: it and its
        second process, :mod:`ppl_bnn.report.background`)."""
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, number)


def main(argv: list[str] | None = None) -> int:
    """Render the report of the results folder ``argv[0]`` at lower priority, without the
    PSIS-LOO comparison; a SIGTERM ends it cleanly (no temporary file left behind)."""
    (results_dir,) = sys.argv[1:] if argv is None else argv
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    from ppl_bnn.report import render_report

    render_report(results_dir, loo=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
