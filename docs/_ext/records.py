"""The ``records`` directive: a table of a suite's committed records, read at build time.

In a page::

    ```{records} default
    :table: headline
    ```

renders ``benchmarks/headline.py``'s table for ``benchmarks/results/default/`` (``:table:``
``headline``, ``standings`` or ``run``), so a benchmark page cannot drift from its records.
``{auto-seeds}`` renders ``benchmarks/results/auto_seeds.json`` (``benchmarks/auto_seeds.py``),
``{compare-overhead}`` ``benchmarks/results/compare_overhead.json``
(``benchmarks/compare_overhead.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import auto_seeds  # noqa: E402  (benchmarks/auto_seeds.py)
import compare_overhead  # noqa: E402  (benchmarks/compare_overhead.py)
import headline  # noqa: E402  (benchmarks/headline.py, not a package)


class RecordsDirective(SphinxDirective):
    """Parse the Markdown of one of :mod:`headline`'s tables into the page."""

    required_arguments = 1
    option_spec = {"table": directives.unchanged}  # noqa: RUF012 (docutils' interface)

    def run(self):  # type: ignore[no-untyped-def]
        suite = self.arguments[0]
        table = self.options.get("table", "headline")
        render = headline.TABLES.get(table)
        if render is None:
            raise self.error(f"unknown records table {table!r}: one of {sorted(headline.TABLES)}")
        folder = headline.RESULTS / suite
        if not folder.is_dir():
            raise self.error(f"no committed records for suite {suite!r} in {folder}")
        for file in folder.iterdir():
            self.env.note_dependency(str(file))
        node = nodes.container()
        self.state.nested_parse(StringList(render(suite).splitlines(), source="records"), 0, node)
        return node.children


class MeasurementDirective(SphinxDirective):
    """Parse the Markdown a benchmark script renders of its committed measurement (its
    ``RECORD`` file, through its ``markdown``) into the page."""

    script: Any  # the benchmark script's module

    def run(self):  # type: ignore[no-untyped-def]
        record = self.script.RECORD
        self.env.note_dependency(str(record))
        text = self.script.markdown(json.loads(record.read_text()))
        node = nodes.container()
        self.state.nested_parse(StringList(text.splitlines(), source=record.stem), 0, node)
        return node.children


class AutoSeedsDirective(MeasurementDirective):
    """The committed ``seeds = "auto"`` measurement."""

    script = auto_seeds


class CompareOverheadDirective(MeasurementDirective):
    """The committed measurement of ``compare``'s overhead."""

    script = compare_overhead


def setup(app):  # type: ignore[no-untyped-def]
    app.add_directive("records", RecordsDirective)
    app.add_directive("auto-seeds", AutoSeedsDirective)
    app.add_directive("compare-overhead", CompareOverheadDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
