"""Where the test suite's time goes, from a JUnit XML file that pytest wrote: seconds per module
and per backend in the test's name (``numpyro``, ``pyro``, neither), and the slowest tests.

    nox -s tests -- -q -n auto --dist loadscope --no-loadscope-reorder --junitxml=junit.xml
    python benchmarks/test_durations.py junit.xml --top 30

The seconds are each test's own (its call, set-up and tear-down; a module-scoped fixture counts
in the first test that uses it), summed over the xdist workers: with ``w`` workers kept busy,
the suite's wall time is about their sum over ``w``.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def durations(junit: Path) -> list[tuple[str, str, float]]:
    """``(module, test name, seconds)`` of every test case in ``junit``."""
    root = ET.parse(junit).getroot()
    return [
        (case.get("classname", ""), case.get("name", ""), float(case.get("time", 0.0)))
        for case in root.iter("testcase")
    ]


def backend_of(name: str) -> str:
    """The backend a test's name (its parameters) names: ``numpyro`` before ``pyro``, which it
    contains."""
    if "numpyro" in name:
        return "numpyro"
    return "pyro" if "pyro" in name else "neither"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--top", type=int, default=25, help="modules and tests listed")
    args = parser.parse_args()
    cases = durations(args.junit)
    modules: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    backends: Counter[str] = Counter()
    for module, name, seconds in cases:
        modules[module] += seconds
        counts[module] += 1
        backends[backend_of(name)] += seconds
    print(f"{len(cases)} tests, {sum(modules.values()):.0f} s summed over the workers")
    print("by backend: " + ", ".join(f"{b} {s:.0f} s" for b, s in backends.most_common()))
    print("\n| seconds | tests | module |\n|---|---|---|")
    for module, seconds in modules.most_common(args.top):
        print(f"| {seconds:.1f} | {counts[module]} | {module} |")
    print("\n| seconds | test |\n|---|---|")
    for module, name, seconds in sorted(cases, key=lambda c: -c[2])[: args.top]:
        print(f"| {seconds:.1f} | {module}::{name} |")


if __name__ == "__main__":
    main()
