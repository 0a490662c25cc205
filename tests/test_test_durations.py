"""``benchmarks/test_durations.py``: a JUnit file's seconds summed per module and per backend
named in the tests' parameters, and the slowest tests first."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "test_durations.py"
_spec = importlib.util.spec_from_file_location("test_durations", SCRIPT)
test_durations = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(test_durations)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.methods.test_a" name="test_fit[svi-numpyro]" time="2.5" />
<testcase classname="tests.methods.test_a" name="test_fit[svi-pyro]" time="4.0" />
<testcase classname="tests.test_b" name="test_plain" time="1.25" />
</testsuite></testsuites>
"""


def test_numpyro_is_named_before_the_pyro_it_contains() -> None:
    assert test_durations.backend_of("test_fit[svi-numpyro]") == "numpyro"
    assert test_durations.backend_of("test_fit[svi-pyro]") == "pyro"
    assert test_durations.backend_of("test_plain") == "neither"


def test_seconds_are_summed_per_module_and_backend_slowest_first(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    assert test_durations.durations(junit)[1] == ("tests.methods.test_a", "test_fit[svi-pyro]", 4.0)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(junit)], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("3 tests, 8 s summed over the workers\n")
    assert "by backend: pyro 4 s, numpyro 2 s, neither 1 s" in out
    assert "| 6.5 | 2 | tests.methods.test_a |" in out
    tests = [line for line in out.splitlines() if line.startswith("| ") and "::" in line]
    assert tests[0] == "| 4.0 | tests.methods.test_a::test_fit[svi-pyro] |"
    assert tests[-1] == "| 1.2 | tests.test_b::test_plain |"
