"""The PSIS-LOO table computed in a second process equals the one computed here, and the report
still gets it where that process cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ppl_bnn.report import background, stats
from ppl_bnn.report.load import load_results


def test_the_second_process_computes_the_table_this_one_would(results_dir: Path) -> None:
    results = load_results(results_dir)
    here = stats.loo_compare(results)
    assert not here.empty

    def not_called() -> pd.DataFrame:
        raise AssertionError("computed here, not in the second process")

    there = background.Background("loo_compare", results, not_called).result()
    pd.testing.assert_frame_equal(there, here)


def test_only_the_cells_this_process_read_are_compared(results_dir: Path) -> None:
    """A sweep may write more cells while the report is built: the second process compares the
    cells the first one read, no others."""
    results = load_results(results_dir)
    results.cells = results.cells[results.cells["dataset"] != "sine"]
    table = background.Background("loo_compare", results, lambda: None).result()
    assert "sine" not in set(table.get("dataset", []))
    pd.testing.assert_frame_equal(table, stats.loo_compare(results))


def test_where_no_process_starts_the_table_is_computed_here(
    results_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_processes(*args: object, **kwargs: object) -> None:
        raise OSError("fork: Resource temporarily unavailable")

    monkeypatch.setattr(background, "ProcessPoolExecutor", no_processes)
    results = load_results(results_dir)
    job = background.Background("loo_compare", results, lambda: "here")
    assert job.result() == "here"


def test_a_second_process_that_fails_leaves_the_table_to_this_one(tmp_path: Path) -> None:
    # The folder the second process would load is not there: it fails, this one computes.
    fake = type("Results", (), {"results_dir": tmp_path / "gone", "cells": pd.DataFrame()})()
    assert background.Background("loo_compare", fake, lambda: "here").result() == "here"


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """The second process does not import the script that started it: a script calling the
    report at its top level, with no ``if __name__ == "__main__":``, runs once."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import pandas as pd\n"
        "from ppl_bnn.report import background\n"
        "print('script ran', flush=True)\n"
        f"gone = type('R', (), {{'results_dir': {str(tmp_path / 'gone')!r}, "
        "'cells': pd.DataFrame()})()\n"
        "print(background.Background('loo_compare', gone, lambda: 'here').result())\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["script ran", "here"], done.stdout + done.stderr
