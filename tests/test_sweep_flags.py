"""``benchmarks/sweep_flags.py``: the table of a suite slice's seconds per XLA flag setting."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "sweep_flags", ROOT / "benchmarks" / "sweep_flags.py"
)
sweep_flags = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_flags)


def _row(sweep_s: float, compile_s: float) -> dict[str, float]:
    return {
        "cells": 48,
        "sweep_s": sweep_s,
        "compile_s": compile_s,
        "tuning_compile_s": 10.0,
        "tuning_s": 20.0,
        "fitting_s": 30.0,
        "in_cells_s": 7.4,
    }


def test_the_table_sums_compiling_and_running_over_the_tuning_and_the_cells_own_fits():
    text = sweep_flags.table({"XLA's defaults": _row(300.4, 100.0), "level 1": _row(240.0, 50.0)})
    lines = text.splitlines()
    assert lines[0].startswith("| flags | cells | sweep s | compile s |")
    assert lines[2] == "| XLA's defaults | 48 | 300 | 110 | 50 | 7 |"
    assert lines[3] == "| level 1 | 48 | 240 | 60 | 50 | 7 |"


def test_every_setting_adds_flags_and_the_tests_setting_is_the_tests_own():
    from tests.runtime import TEST_XLA_FLAGS

    assert sweep_flags.SETTINGS["XLA's defaults"] == ()
    assert sweep_flags.SETTINGS["the tests' flags"] == TEST_XLA_FLAGS
    assert all(
        flag.startswith("--xla_") for flags in sweep_flags.SETTINGS.values() for flag in flags
    )
