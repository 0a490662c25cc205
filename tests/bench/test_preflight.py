"""What a suite's cells need that this machine lacks is refused before its results folder is
made or a process started."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ppl_bnn.cli import main

HUGE = """
name = "huge"
[model]
hidden = [{hidden}]
[[datasets]]
name = "sine"
[methods.map]
num_steps = 10
"""


def test_a_network_too_large_for_the_machine_is_refused_before_the_sweep(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tmp_path / "huge.toml"
    suite.write_text(HUGE.format(hidden=1_000_000_000))
    reports = tmp_path / "reports"
    with caplog.at_level(logging.ERROR):
        assert main(["bench", "--suite", str(suite), "--reports-dir", str(reports)]) == 2
    assert "sine-split0-map-numpyro-seed0: not enough memory for 'map'" in caplog.text
    assert not reports.exists()
