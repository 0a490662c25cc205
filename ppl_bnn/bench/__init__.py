"""The benchmark: suites of cells run in separate processes, stored, resumable.

>>> from ppl_bnn.bench import load_suite, run_suite
>>> summary = run_suite(load_suite("default"), "reports/default")  # doctest: +SKIP
"""

from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.runner import SweepSummary, run_suite
from ppl_bnn.bench.suite import Suite, SuiteError, load_suite

__all__ = ["Cell", "Suite", "SuiteError", "SweepSummary", "load_suite", "run_suite"]
