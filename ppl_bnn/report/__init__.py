"""Render a benchmark suite's stored results as a report, without refitting anything.

>>> from ppl_bnn.report import render_report
>>> render_report("reports/default")  # doctest: +SKIP
PosixPath('reports/default/index.html')

Writes ``index.html`` (self-contained: inline CSS, base64 PNG figures), ``report.md`` (the same
tables, figures linked from ``figures/``), ``figures/*.png``, ``results.csv`` (one row per
cell; for a performance suite, one row per measured quantity, see :mod:`.perf`) and, beside
it, ``summary.json``: the recommendation per dataset (:mod:`.recommend`), its sentence and every
contestant's standing. Every number
comes from the stored records and netCDF files, except published reference figures
(:mod:`ppl_bnn.report.published_figures`), which are labelled with their source.
"""

from __future__ import annotations

import importlib
from typing import Any

# The bench package first, as every entry point imports it: its runner imports the report's
# modules that read its records (report.load imports bench's), which import it in turn.
import ppl_bnn.bench  # noqa: F401

HTML_FILE = "index.html"
#: The key of what the report in a folder was rendered from (:func:`results_state`).
STATE_FILE = ".report-state"
MARKDOWN_FILE = "report.md"
CSV_FILE = "results.csv"
#: The recommendations as data: ``{"suite": ..., "datasets": [...]}``.
SUMMARY_FILE = "summary.json"
FIGURES_DIR = "figures"

#: The package's functions and classes, by the module that holds them: imported when first
#: asked for, so that importing a submodule (a worker's :mod:`ppl_bnn.report.equivalence`)
#: does not import the report's figures and matplotlib.
_LAZY = {
    "SuiteResults": "ppl_bnn.report.load",
    "load_results": "ppl_bnn.report.load",
    "recommendation_lines": "ppl_bnn.report.render",
    "render_report": "ppl_bnn.report.render",
    "report_is_current": "ppl_bnn.report.render",
    "results_csv": "ppl_bnn.report.render",
    "results_state": "ppl_bnn.report.render",
}

__all__ = [
    "SuiteResults",
    "load_results",
    "recommendation_lines",
    "render_report",
    "report_is_current",
    "results_csv",
]


def __getattr__(name: str) -> Any:
    """The function or class ``name`` of :data:`_LAZY`, from its module."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
