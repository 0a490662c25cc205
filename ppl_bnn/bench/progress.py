"""A sweep's progress where its user looks: a widget in a notebook that has ipywidgets, a text
bar in a terminal or another notebook (no warning about the widget; a notebook run under CI
included), and where no one watches a bar (output to a file, a terminal under CI) a logged line
with the count, the time spent and an estimate of the time left, every tenth of the jobs or
every :data:`LINE_EVERY_S` seconds, whichever comes first.

A sweep's references run first and take minutes each, its cells seconds: :class:`SweepProgress`
counts them as two phases on one display, so that each phase's time left is estimated from its
own jobs (one estimate over both would read a reference's minutes as every cell's)."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from typing import Any

logger = logging.getLogger("ppl_bnn.bench.runner")

#: Most seconds between two logged progress lines while jobs finish.
LINE_EVERY_S = 60.0


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel."""
    shell = sys.modules.get("IPython")
    ip = getattr(shell, "get_ipython", lambda: None)() if shell else None
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


class LoggedProgress:
    """A progress bar's interface (``update``, ``set_postfix_str``, a context manager) that
    logs lines: "k of n jobs done (t spent, about u left)"."""

    def __init__(self, total: int, *, unit: str = "job", clock: Any = time.monotonic) -> None:
        self.unit, self._clock = unit, clock
        self.reset(total)

    def reset(self, total: int) -> None:
        """Count ``total`` new jobs from zero, timed from now."""
        self.total, self.done = total, 0
        self._start = self._last = self._clock()
        self._step = max(1, total // 10)
        self._next = self._step

    def update(self, n: int = 1) -> None:
        self.done += n
        now = self._clock()
        if self.done >= self._next or self.done >= self.total or now - self._last >= LINE_EVERY_S:
            self._next = (self.done // self._step + 1) * self._step
            self._last = now
            logger.info("%s", self.line(now))

    def line(self, now: float) -> str:
        spent = now - self._start
        text = f"{self.done} of {self.total} {self.unit}s done ({_minutes(spent)} spent"
        if 0 < self.done < self.total and spent > 0:
            left = spent / self.done * (self.total - self.done)
            return f"{text}, about {_minutes(left)} left)"
        return f"{text})"

    def set_postfix_str(self, text: str) -> None:
        """A job's outcome, or a reference's batch relayed by its worker: each is logged
        where it arises."""

    def __enter__(self) -> LoggedProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def progress(total: int, unit: str = "job") -> Any:
    """The progress display for ``total`` jobs (see the module docstring)."""
    notebook = _in_notebook()  # first: a notebook run under CI still shows in the notebook
    if notebook and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm

        return tqdm(total=total, unit=unit)
    # A notebook shows a text bar's updates in place; a terminal does, unless CI logs it.
    if notebook or (os.isatty(2) and not os.environ.get("CI")):
        from tqdm import tqdm

        return tqdm(total=total, unit=unit, dynamic_ncols=True, file=sys.stderr)
    return LoggedProgress(total, unit=unit)


class SweepProgress:
    """A sweep's references, then its cells, counted on one display (:func:`progress`): first
    the references, then, once the last has finished, the cells from zero with a new clock (a
    cell that finished while references still ran is counted then)."""

    def __init__(self, references: int, cells: int, *, display: Any = progress) -> None:
        self._totals = {"reference": references, "cell": cells}
        self._phase = "reference" if references else "cell"
        self._waiting = {"reference": 0, "cell": 0}  # done before their phase began
        self.bar = display(self._totals[self._phase], unit=self._phase)

    def __enter__(self) -> SweepProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self.bar.__exit__(*exc)

    def done(self, kind: str, n: int = 1) -> None:
        """``n`` jobs of ``kind`` (``"reference"`` or ``"cell"``) finished."""
        if kind != self._phase:
            self._waiting[kind] += n
            return
        self._totals[kind] -= n
        self.bar.update(n)
        if kind == "reference" and self._totals["reference"] == 0 and self._totals["cell"]:
            self._phase = self.bar.unit = "cell"
            self.bar.reset(total=self._totals["cell"])
            if self._waiting["cell"]:
                self.done("cell", self._waiting["cell"])

    def set_postfix_str(self, text: str) -> None:
        self.bar.set_postfix_str(text)
