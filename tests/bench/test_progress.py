"""A sweep's progress without a terminal: logged lines with the count, the time spent and the
time left, every tenth of the jobs or every minute; a bar where someone watches one."""

from __future__ import annotations

import logging

import pytest

from ppl_bnn.bench import progress as progress_module
from ppl_bnn.bench.progress import LINE_EVERY_S, LoggedProgress, SweepProgress, progress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "jobs done" in r.getMessage()]


def test_a_line_every_tenth_of_the_jobs_with_the_time_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    with (
        caplog.at_level(logging.INFO, logger="ppl_bnn.bench.runner"),
        LoggedProgress(20, clock=clock) as bar,
    ):
        for _ in range(20):
            clock.now += 6.0
            bar.update()
    lines = _lines(caplog)
    assert len(lines) == 10
    assert lines[0] == "2 of 20 jobs done (12 s spent, about 1.8 min left)"
    assert lines[4] == "10 of 20 jobs done (60 s spent, about 60 s left)"
    assert lines[-1] == "20 of 20 jobs done (2.0 min spent)"


def test_slow_jobs_get_a_line_each_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    with caplog.at_level(logging.INFO, logger="ppl_bnn.bench.runner"):
        bar = LoggedProgress(100, clock=clock)
        clock.now += 5.0
        bar.update()  # 1 of 100: not yet a tenth, not yet a minute
        clock.now += LINE_EVERY_S
        bar.update(2)  # a group of seeds finishing together
    assert _lines(caplog) == ["3 of 100 jobs done (65 s spent, about 35.0 min left)"]


def test_no_bar_without_a_terminal_or_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setattr(progress_module.os, "isatty", lambda fd: True)
    assert isinstance(progress(5), LoggedProgress)
    monkeypatch.delenv("CI")
    monkeypatch.setattr(progress_module.os, "isatty", lambda fd: False)
    assert isinstance(progress(5), LoggedProgress)
    monkeypatch.setattr(progress_module.os, "isatty", lambda fd: True)
    bar = progress(5)
    assert not isinstance(bar, LoggedProgress)
    bar.close()


def test_a_notebook_shows_a_bar_even_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook executed in CI (a docs build, a notebook test) still shows its progress in the
    notebook: logged lines would reach no handler there."""
    monkeypatch.setenv("CI", "1")
    monkeypatch.setattr(progress_module, "_in_notebook", lambda: True)
    monkeypatch.setattr(progress_module.os, "isatty", lambda fd: False)
    bar = progress(5)
    assert not isinstance(bar, LoggedProgress)
    bar.close()


def test_references_then_cells_each_estimate_their_own_time_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reference's minutes are not read as every cell's: each phase has its own count and
    clock, and a cell done while a reference still ran is counted when the cells' phase begins."""
    clock = _Clock()
    with caplog.at_level(logging.INFO, logger="ppl_bnn.bench.runner"):
        sweep = SweepProgress(
            2, 10, display=lambda total, unit: LoggedProgress(total, unit=unit, clock=clock)
        )
        with sweep:
            clock.now += 300.0
            sweep.done("reference")
            clock.now += 6.0
            sweep.done("cell")  # beside the second reference
            clock.now += 294.0
            sweep.done("reference")
            for _ in range(9):
                clock.now += 6.0
                sweep.done("cell")
    lines = [r.getMessage() for r in caplog.records if " done (" in r.getMessage()]
    assert lines[:2] == [
        "1 of 2 references done (5.0 min spent, about 5.0 min left)",
        "2 of 2 references done (10.0 min spent)",
    ]
    assert lines[2] == "1 of 10 cells done (0 s spent)"  # the early one: no rate yet
    assert lines[3] == "2 of 10 cells done (6 s spent, about 24 s left)"
    assert lines[-1] == "10 of 10 cells done (54 s spent)"


def test_a_sweep_of_cells_alone_counts_cells() -> None:
    sweep = SweepProgress(0, 3, display=lambda total, unit: LoggedProgress(total, unit=unit))
    assert (sweep.bar.total, sweep.bar.unit) == (3, "cell")
