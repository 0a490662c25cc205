"""Published UCI figures: names map to the data folders, NLL becomes LL, sources are labelled."""

from __future__ import annotations

import pytest

from ppl_bnn.report.published_figures import UCI_DATASETS, published_regression_for, uci_name

NAMES = {
    "boston": "bostonHousing",
    "bostonHousing": "bostonHousing",
    "uci-boston": "bostonHousing",
    "naval": "naval-propulsion-plant",
    "naval-propulsion-plant": "naval-propulsion-plant",
    "power-plant": "power-plant",
    "protein": "protein-tertiary-structure",
    "wine": "wine-quality-red",
    "kin8nm": "kin8nm",
    "concrete": "concrete",
    "sine": None,
    "digits": None,
}


@pytest.mark.parametrize(("name", "folder"), NAMES.items())
def test_dataset_names(name: str, folder: str | None) -> None:
    assert uci_name(name) == folder


def test_every_uci_set_has_four_labelled_published_figures() -> None:
    for folder in UCI_DATASETS:
        refs = published_regression_for(folder)
        assert [r.method for r in refs] == [
            "MC dropout",
            "MC dropout, grid search",
            "PBP",
            "deep ensembles",
        ]
        assert all(r.source.label and r.source.url.startswith("https://") for r in refs)


def test_mc_dropout_figures_carry_their_published_standard_errors() -> None:
    boston = {r.method: r for r in published_regression_for("boston")}
    paper, grid = boston["MC dropout"], boston["MC dropout, grid search"]
    assert (paper.rmse, paper.rmse_se, paper.test_ll, paper.test_ll_se) == (2.97, 0.19, -2.46, 0.06)
    assert (grid.rmse, grid.rmse_se, grid.test_ll, grid.test_ll_se) == (2.90, 0.18, -2.40, 0.04)
    assert boston["PBP"].test_ll_se is None  # listed without one


def test_deep_ensembles_nll_is_turned_into_a_log_likelihood() -> None:
    kin8nm = {r.method: r for r in published_regression_for("kin8nm")}
    assert kin8nm["deep ensembles"].test_ll == 1.20  # published NLL -1.20
    assert kin8nm["MC dropout"].test_ll == 0.95
    rmse = {r.method: r.rmse for r in published_regression_for("boston")}
    assert rmse == {
        "MC dropout": 2.97,
        "MC dropout, grid search": 2.90,
        "PBP": 3.01,
        "deep ensembles": 3.28,
    }
