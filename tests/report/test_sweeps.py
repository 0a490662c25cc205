"""A study (a suite's ``sweep``) in the report: kept apart from the contestants, shown in its
own section with a figure and a table computed from its stored files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from matplotlib.image import imread

from ppl_bnn.bench.cell import Cell
from ppl_bnn.report import load_results
from ppl_bnn.report.sweeps import studies, sweep_figure
from tests.report.builder import STUDY_BETAS
from tests.report.helpers import row, section, tables

FIGURE = "sine-beta-sweep-kl-weight"


def test_study_cells_are_kept_out_of_the_contestants(results_dir: Path) -> None:
    results = load_results(results_dir)
    assert not results.cells["cell_id"].str.contains("kl_weight").any()
    assert "sine/beta" not in results.datasets()
    assert sorted(results.sweeps["cell_id"]) == sorted(
        f"sine-beta-split0-svi-{b}-seed0-kl_weight{v}"
        for b in ("numpyro", "pyro")
        for v in ("1.0", "0.01")
    )
    (study,) = studies(results)
    assert (study.dataset, study.method, study.option) == ("sine/beta", "svi", "kl_weight")
    assert study.values == sorted(STUDY_BETAS, reverse=True)
    assert study.backends == ["numpyro", "pyro"]


def test_the_summary_and_overview_say_where_the_study_is(html: str) -> None:
    summary = section(html, "summary")
    assert "Not ranked: β sweep of svi on sine/beta (4 cells)" in summary
    assert '<a href="#studies">Studies</a>' in summary
    assert "sine/beta" not in summary.replace("Not ranked: β sweep of svi on sine/beta", "")
    assert "4 study cells" in section(html, "overview")
    assert 'id="dataset-sine-beta"' not in html


def test_the_study_section_has_its_figure_caption_and_table(html: str, report_dir: Path) -> None:
    studies_html = section(html, "studies")
    assert "not contestants" in studies_html
    assert "svi (mean-field Gaussian VI) on sine/beta, split 0, seed 0" in studies_html
    assert "kl_weight = 1, 0.01 on numpyro, pyro: 4 cells (3 ok, 1 failed)" in studies_html
    assert "Options held fixed: num_steps = 100." in studies_html
    # The caption's numbers are the mean epistemic std written into the predictions.
    assert (
        "Mean epistemic std over the range of the training inputs: numpyro β = 1: 2.50, β = 0.01: "
        "0.250; pyro β = 1: 2.50."
    ) in studies_html
    assert "dark band: ±2 epistemic std" in studies_html
    assert "the truth, 10 sin(2πx), the noise-free mean of the sine set" in studies_html
    png = imread(io.BytesIO((report_dir / "figures" / f"{FIGURE}.png").read_bytes()))
    assert png.shape[1] > png.shape[0]  # two panels a row, a legend beside them
    (table,) = tables(studies_html)
    assert table[0][:3] == ["β", "backend", "status"]
    got = row(table, "0.01", "numpyro")
    assert got["test log-lik."] == "-2.01" and got["RMSE"] == "1.51"
    assert got["epistemic std, near zero"] == "0.250" and got["epistemic std, far"] == "0.500"
    assert got["fit time without compiling (s)"] == "2.50" and got["compile (s)"] == "1.50"
    assert row(table, "0.01", "pyro")["status"] == "failed"
    assert [r[0] for r in table[1:]] == ["1", "1", "0.01", "0.01"]


def test_a_study_without_grid_predictions_has_no_figure(
    results_dir: Path, cells: dict[str, Cell], monkeypatch: pytest.MonkeyPatch
) -> None:
    results = load_results(results_dir)
    (study,) = studies(results)
    assert sweep_figure(results, study) is not None
    monkeypatch.setattr(type(results), "predictions", lambda self, cell_id, variables=None: None)
    assert sweep_figure(results, study) is None
