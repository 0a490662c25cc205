"""A tiny suite's results, fitted once per session, and its rendered report."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppl_bnn.bench.cell import Cell
from ppl_bnn.report import render_report
from tests.report.builder import build


@pytest.fixture(scope="session")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Cell]]:
    """The results folder of the tiny suite and its cells by short name."""
    root = tmp_path_factory.mktemp("results")
    return root, build(root)


@pytest.fixture(scope="session")
def results_dir(suite: tuple[Path, dict[str, Cell]]) -> Path:
    return suite[0]


@pytest.fixture(scope="session")
def cells(suite: tuple[Path, dict[str, Cell]]) -> dict[str, Cell]:
    return suite[1]


@pytest.fixture(scope="session")
def report_dir(results_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the whole tiny suite, rendered once into its own folder."""
    out = tmp_path_factory.mktemp("report")
    index = render_report(results_dir, out)
    assert index == out / "index.html"
    return out


@pytest.fixture(scope="session")
def html(report_dir: Path) -> str:
    return (report_dir / "index.html").read_text(encoding="utf-8")
