"""The pruning table and figure beside Blundell et al.'s published figures, from stored records
with known pruning curves (no fits)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.bench.evaluate import PRUNE_FRACTIONS
from ppl_bnn.report import fmt, render_report
from ppl_bnn.report.document import Link
from ppl_bnn.report.figures import pruning
from ppl_bnn.report.load import SuiteResults, load_results
from ppl_bnn.report.pruning import pruning_table
from ppl_bnn.report.published_figures import BLUNDELL_PRUNING, published_pruning_for
from tests.report.helpers import row, section, tables
from tests.report.pruning_records import (
    SEEDS,
    pruned_accuracy,
    pruned_test_ll,
    write_pruning_suite,
)

#: Blundell et al. 2015, Table 2, as the report must show it (blank where not published).
PUBLISHED = {0.0: "1.24", 0.5: "1.24", 0.75: "1.24", 0.95: "1.29", 0.98: "1.39"}
URL = "https://arxiv.org/abs/1505.05424"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pruning")
    write_pruning_suite(root)
    return root


@pytest.fixture(scope="module")
def results(root: Path) -> SuiteResults:
    return load_results(root)


def _columns() -> list[str]:
    return [f"{fmt.number(100 * f)}% pruned" for f in PRUNE_FRACTIONS]


def test_blundells_figures_belong_to_the_mnist_mlps_only() -> None:
    for dataset in ("mnist", "mnist/mlp1024"):
        (ref,) = published_pruning_for(dataset)
        assert ref.test_error == (
            (0.0, 1.24),
            (0.5, 1.24),
            (0.75, 1.24),
            (0.95, 1.29),
            (0.98, 1.39),
        )
        assert ref.source is BLUNDELL_PRUNING and ref.source.url == URL
        assert ref.dataset == dataset and "1200" in ref.model
    for dataset in ("mnist/lenet5", "digits", "sine", "fashion-mnist", "bostonHousing"):
        assert published_pruning_for(dataset) == []


def test_our_test_error_in_percent_beside_the_published_rows(results: SuiteResults) -> None:
    table = pruning_table(results, "mnist/mlp1024")
    assert table is not None
    assert table.header == ("method", "backend or source", "metric", *_columns())
    by_row = {(r[0], r[1], r[2]): r[3:] for r in table.rows if isinstance(r[1], str)}
    for backend in ("numpyro", "pyro"):
        acc = np.mean([pruned_accuracy(backend, s) for s in SEEDS], axis=0)
        ll = np.mean([pruned_test_ll(backend, s) for s in SEEDS], axis=0)
        assert by_row[("svi", backend, "test error (%)")] == tuple(map(fmt.number, 100 * (1 - acc)))
        assert by_row[("svi", backend, "test LL")] == tuple(map(fmt.number, ll))
    # numpyro's seeds average 0.979 at 0% pruned: 2.10% test error.
    assert by_row[("svi", "numpyro", "test error (%)")][0] == "2.10"
    assert not any(key[2] == "accuracy" for key in by_row)  # error replaces accuracy here
    (published,) = [r for r in table.rows if isinstance(r[1], Link)]
    assert published[1] == Link("Blundell et al. 2015, Table 2", URL)
    assert published[2] == "test error (%)"
    assert published[3:] == tuple(PUBLISHED.get(f, "") for f in PRUNE_FRACTIONS)
    assert table.row_classes == ("",) * 4 + ("published",)
    assert "one hidden layer of 1,024 units" in table.caption
    assert "two hidden layers of 1,200 units" in table.caption
    assert "typed in from their source" in table.caption


def test_the_two_layer_mlp_states_its_own_architecture(results: SuiteResults) -> None:
    table = pruning_table(results, "mnist")
    assert table is not None and table.row_classes[-1] == "published"
    assert "2 hidden layers of 400 units" in table.caption


@pytest.mark.parametrize("dataset", ["mnist/lenet5", "digits"])
def test_no_published_rows_where_none_belong(results: SuiteResults, dataset: str) -> None:
    table = pruning_table(results, dataset)
    assert table is not None
    assert table.header == ("method", "backend", "metric", *_columns())
    assert [r[2] for r in table.rows] == ["test LL", "accuracy"] * 2
    assert all(isinstance(cell, str) for r in table.rows for cell in r)
    assert "published" not in table.row_classes and "Blundell et al.'s" not in table.caption
    acc = np.mean([pruned_accuracy("pyro", s) for s in SEEDS], axis=0)
    assert table.rows[3][3:] == tuple(map(fmt.number, acc))


def test_the_figure_draws_the_published_line_where_it_belongs(results: SuiteResults) -> None:
    with_refs = pruning(results, "mnist/mlp1024")
    without = pruning(results, "mnist/lenet5")
    assert with_refs is not None and without is not None
    assert "Black dashed: Blundell et al.'s published test error" in with_refs.caption
    assert "Blundell et al.'s published" not in without.caption


def test_the_report_links_the_published_rows_of_the_mlps_only(root: Path, tmp_path: Path) -> None:
    html = render_report(root, tmp_path / "out").read_text(encoding="utf-8")
    for dataset in ("mnist", "mnist-mlp1024"):
        figures = section(html, f"{dataset}-figures")
        assert re.search(
            rf'<a href="{re.escape(URL)}"[^>]*>Blundell et al. 2015, Table 2</a>', figures
        )
        assert figures.count('<tr class="published">') == 1
        table = tables(figures)[-1]
        published = row(table, "Bayes by Backprop, MLP 2 x 1200")
        assert published["backend or source"] == "Blundell et al. 2015, Table 2"
        assert [published[c] for c in _columns()] == [PUBLISHED.get(f, "") for f in PRUNE_FRACTIONS]
        assert row(table, "svi", "numpyro", "test error (%)")["0% pruned"] == "2.10"
        assert row(table, "svi", "pyro", "test LL")["98% pruned"] == fmt.number(-0.405)
    for dataset in ("mnist-lenet5", "digits"):
        figures = section(html, f"{dataset}-figures")
        assert URL not in figures and 'class="published"' not in figures
        assert row(tables(figures)[-1], "svi", "pyro", "accuracy")["0% pruned"] == "0.975"
