"""A sweep's progress without a terminal: logged lines with the count, the time spent and the
time left, every tenth of the jobs or every minute; a bar where someone watches one."""

from __future__ import annotations

import logging

import pytest

from ppl_bnn.bench import progress as progress_module
from ppl_bnn.bench.progress import LINE_EVERY_S, LoggedProgress, progress


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
    assert isinstance(progress(5), LoggedProgress)
    monkeypatch.delenv("CI")
    monkeypatch.setattr(progress_module.os, "isatty", lambda fd: False)
    assert isinstance(progress(5), LoggedProgress)
    monkeypatch.setattr(progress_module.os, "isatty", lambda fd: True)
    bar = progress(5)
    assert not isinstance(bar, LoggedProgress)
    bar.close()
