"""Writing a suite's report files from its stored results (:mod:`ppl_bnn.report`): the HTML and
Markdown documents, their figures, ``results.csv`` and ``summary.json``, and whether the report
in a folder is current."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ppl_bnn.bench.environment import git_commit
from ppl_bnn.bench.record import RECORD_FILE
from ppl_bnn.files import write_atomic
from ppl_bnn.keys import content_key
from ppl_bnn.reference import REFERENCES_DIR
from ppl_bnn.report import (
    CSV_FILE,
    FIGURES_DIR,
    HTML_FILE,
    MARKDOWN_FILE,
    STATE_FILE,
    SUMMARY_FILE,
)
from ppl_bnn.report.build import build_document
from ppl_bnn.report.html import render_html
from ppl_bnn.report.load import SUITE_FILE, SuiteResults, load_results
from ppl_bnn.report.markdown import render_markdown
from ppl_bnn.report.perf import build_perf_document, rows_frame
from ppl_bnn.versions import library_versions

# Named as the package, where the report has always logged.
logger = logging.getLogger("ppl_bnn.report")


def results_csv(results: SuiteResults) -> str:
    """One row per cell (a study's cells last, with the option they sweep in ``sweep``): ids,
    status, error, budget note, config, every metric, timings."""
    if results.sweeps.empty:
        return results.cells.to_csv(index=False)
    return pd.concat([results.cells, results.sweeps], ignore_index=True).to_csv(index=False)


def _write(path: Path, data: str | bytes) -> None:
    """Write atomically, readable by others (the report is meant to be shared)."""
    if isinstance(data, str):
        write_atomic(path, lambda tmp: Path(tmp).write_text(data, encoding="utf-8"))
    else:
        write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))
    path.chmod(0o644)


def results_state(results_dir: Path) -> str:
    """A key of what a report of ``results_dir`` is rendered from: every file under ``cells/``
    and ``references/`` by path and size, and the records by content (a record changes with
    every run of its cell or reference; a sweep that republishes a reference unchanged leaves
    the key as it was), what ``suite.json`` says of the suite (not the environment and wall
    time each sweep rewrites) and the library's version and commit."""
    source = Path(__file__).resolve().parents[2]
    parts: list[object] = [library_versions()["ppl_bnn"], git_commit(source)]
    try:
        suite = json.loads((results_dir / SUITE_FILE).read_text())
    except (OSError, ValueError):
        suite = None
    if isinstance(suite, dict):
        parts.append({k: v for k, v in suite.items() if k not in ("environment", "wall_s")})
    for folder in ("cells", REFERENCES_DIR):
        for path in sorted((results_dir / folder).rglob("*")):
            if path.is_file():
                content = path.read_bytes() if path.name == RECORD_FILE else None
                parts.append((str(path.relative_to(results_dir)), path.stat().st_size, content))
    return content_key(*parts)


def report_is_current(results_dir: str | Path) -> bool:
    """Whether ``results_dir``'s report was rendered (in place) from what the folder holds now,
    so that rendering it again would give the same report."""
    root = Path(results_dir)
    try:
        stored = (root / STATE_FILE).read_text()
    except OSError:
        return False
    return (root / HTML_FILE).is_file() and stored == results_state(root)


def render_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    configs: tuple[Mapping[str, str], str] | None = None,
    loo: bool = True,
) -> Path:
    """Render the suite stored in ``results_dir`` into ``out_dir`` (default: ``results_dir``).

    Args:
        results_dir: A suite's results folder (``suite.json`` and ``cells/<cell_id>/``).
        out_dir: Where ``index.html``, ``report.md``, ``results.csv`` and ``figures/`` go.
        configs: The suite the stored cells are checked against (see
            :func:`~ppl_bnn.report.load.load_results`; default: ``suite.json``'s).
        loo: Whether to compute the PSIS-LOO comparison (the report's slowest table); the
            live report of a running sweep leaves it for the final render.

    Returns:
        The path of ``index.html``.
    """
    start = time.perf_counter()
    results = load_results(results_dir, configs)
    out = Path(out_dir) if out_dir is not None else Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    perf = results.suite.get("kind") == "perf"
    document = build_perf_document(results) if perf else build_document(results, loo=loo)
    figures = out / FIGURES_DIR
    figures.mkdir(exist_ok=True)
    shown = document.figures()
    for figure in shown:
        _write(figures / f"{figure.name}.png", figure.png)
    _write(
        out / CSV_FILE,
        rows_frame(results.records).to_csv(index=False) if perf else results_csv(results),
    )
    if not perf:
        summary = {"suite": results.name, "datasets": list(document.verdict)}
        _write(out / SUMMARY_FILE, json.dumps(summary, indent=2, allow_nan=False) + "\n")
    _write(out / MARKDOWN_FILE, render_markdown(document, FIGURES_DIR))
    index = out / HTML_FILE
    _write(index, render_html(document))
    if out == Path(results_dir) and not results.progress:  # a finished sweep's whole report
        _write(out / STATE_FILE, results_state(out))
    logger.info(
        "report of %d cells with %d figures written to %s in %.1fs",
        len(results.records),
        len(shown),
        index,
        time.perf_counter() - start,
    )
    return index


def recommendation_lines(report_dir: str | Path) -> list[str]:
    """``"<dataset>: <recommendation>"`` per dataset, from a rendered report's
    ``summary.json`` (none where it has no such file, as a performance suite's)."""
    try:
        summary = json.loads((Path(report_dir) / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [f"{entry['dataset']}: {entry['sentence']}" for entry in summary.get("datasets", [])]
