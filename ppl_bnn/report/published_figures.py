"""Published figures, the only typed-in numbers of a report.

UCI regression: test RMSE and test log-likelihood, mean over the standard 20 train/test splits
(5 for protein) with one hidden layer of 50 units (100 for protein), as published. MNIST: test
accuracy (and NLL where published) of the networks of the ``mnist`` suite's variants, and
Blundell et al.'s test error after pruning weights by signal-to-noise, beside the MLPs' pruning
curves. Everything else in a report is computed from stored results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ppl_bnn.data.uci import UCI_SETS


@dataclass(frozen=True)
class Source:
    """Where a published figure comes from."""

    label: str
    citation: str
    url: str


@dataclass(frozen=True)
class PublishedRegression:
    """One published (method, dataset) result in original units."""

    method: str
    dataset: str
    rmse: float
    test_ll: float
    source: Source
    rmse_se: float | None = None
    test_ll_se: float | None = None


GAL_README = Source(
    label="Gal & Ghahramani 2016, Table 1, with standard errors from the repository readme",
    citation="Y. Gal and Z. Ghahramani, Dropout as a Bayesian Approximation, ICML 2016",
    url="https://github.com/yaringal/DropoutUncertaintyExps/tree/a6259f1db8f5d3e2d743f88ecbde425a07b12445",
)
GAL_GRID_SEARCH = Source(
    label=(
        "Gal & Ghahramani, repository readme (2018): re-run with the dropout rate and noise "
        "chosen by grid search on an 80/20 split of each training set"
    ),
    citation=(
        "Y. Gal, DropoutUncertaintyExps, commit 6eb4497 (2018-08-09), the code and splits of "
        "Dropout as a Bayesian Approximation, ICML 2016"
    ),
    url="https://github.com/yaringal/DropoutUncertaintyExps/tree/6eb4497628d12b0f300f4b4f6bdc386bebad565c",
)
PBP_VIA_GAL = Source(
    label="Hernández-Lobato & Adams 2015 (PBP), as listed in the Gal & Ghahramani 2016 readme",
    citation="J. M. Hernández-Lobato and R. P. Adams, Probabilistic Backpropagation, ICML 2015",
    url="https://github.com/yaringal/DropoutUncertaintyExps",
)
DEEP_ENSEMBLES = Source(
    label="Lakshminarayanan et al. 2017, Table 1 (published NLL; test LL = -NLL)",
    citation=(
        "B. Lakshminarayanan, A. Pritzel and C. Blundell, Simple and Scalable Predictive "
        "Uncertainty Estimation using Deep Ensembles, NeurIPS 2017"
    ),
    url="https://arxiv.org/abs/1612.01474",
)

#: Dataset folder names of the UCI benchmark (``<data_dir>/uci/<name>``).
UCI_DATASETS: tuple[str, ...] = UCI_SETS

# (PBP RMSE, LL), (deep ensembles RMSE, NLL) per data folder name.
_TABLE: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "bostonHousing": ((3.01, -2.57), (3.28, 2.41)),
    "concrete": ((5.67, -3.16), (6.03, 3.06)),
    "kin8nm": ((0.10, 0.90), (0.09, -1.20)),
    "naval-propulsion-plant": ((0.01, 3.73), (0.00, -5.63)),
    "power-plant": ((4.12, -2.84), (4.11, 2.79)),
    "protein-tertiary-structure": ((4.73, -2.97), (4.71, 2.83)),
    "wine-quality-red": ((0.64, -0.97), (0.64, 0.94)),
}

# MC dropout with standard errors over the splits, (RMSE, SE, LL, SE): the paper's figures
# ("original", readme at a6259f1) and the 2018 grid-search re-run ("new", readme at 6eb4497).
_DROPOUT_SE: dict[str, tuple[float, float, float, float]] = {
    "bostonHousing": (2.97, 0.19, -2.46, 0.06),
    "concrete": (5.23, 0.12, -3.04, 0.02),
    "kin8nm": (0.10, 0.00, 0.95, 0.01),
    "naval-propulsion-plant": (0.01, 0.00, 3.80, 0.01),
    "power-plant": (4.02, 0.04, -2.80, 0.01),
    "protein-tertiary-structure": (4.36, 0.01, -2.89, 0.00),
    "wine-quality-red": (0.62, 0.01, -0.93, 0.01),
}
_DROPOUT_GRID_SEARCH: dict[str, tuple[float, float, float, float]] = {
    "bostonHousing": (2.90, 0.18, -2.40, 0.04),
    "concrete": (4.82, 0.16, -2.93, 0.02),
    "kin8nm": (0.08, 0.00, 1.14, 0.01),
    "naval-propulsion-plant": (0.00, 0.00, 4.45, 0.00),
    "power-plant": (4.01, 0.04, -2.80, 0.01),
    "protein-tertiary-structure": (4.27, 0.02, -2.87, 0.00),
    "wine-quality-red": (0.62, 0.01, -0.93, 0.01),
}

# Short names (DESIGN.md, common usage) -> data folder names.
_ALIASES = {
    "boston": "bostonHousing",
    "bostonhousing": "bostonHousing",
    "housing": "bostonHousing",
    "concrete": "concrete",
    "kin8nm": "kin8nm",
    "naval": "naval-propulsion-plant",
    "navalpropulsionplant": "naval-propulsion-plant",
    "power": "power-plant",
    "powerplant": "power-plant",
    "protein": "protein-tertiary-structure",
    "proteintertiarystructure": "protein-tertiary-structure",
    "wine": "wine-quality-red",
    "winequalityred": "wine-quality-red",
}


def uci_name(dataset: str) -> str | None:
    """The UCI data folder name for ``dataset`` (``"boston"``, ``"uci-boston"``, ...), or None."""
    key = re.sub(r"[^a-z0-9]", "", dataset.lower())
    if key.startswith("uci") and key not in _ALIASES:
        key = key[3:]
    return _ALIASES.get(key)


def published_regression_for(dataset: str) -> list[PublishedRegression]:
    """Published figures for ``dataset`` (empty when it is not one of the UCI sets)."""
    name = uci_name(dataset)
    if name is None:
        return []
    pbp, ensembles = _TABLE[name]
    rmse, rmse_se, ll, ll_se = _DROPOUT_SE[name]
    grid = _DROPOUT_GRID_SEARCH[name]
    return [
        PublishedRegression("MC dropout", name, rmse, ll, GAL_README, rmse_se, ll_se),
        PublishedRegression(
            "MC dropout, grid search", name, grid[0], grid[2], GAL_GRID_SEARCH, *grid[1::2]
        ),
        PublishedRegression("PBP", name, pbp[0], pbp[1], PBP_VIA_GAL),
        PublishedRegression("deep ensembles", name, ensembles[0], -ensembles[1], DEEP_ENSEMBLES),
    ]


@dataclass(frozen=True)
class PublishedClassification:
    """One published MNIST result: test accuracy and, where published, NLL (nats)."""

    model: str
    dataset: str
    accuracy: float
    nll: float | None
    source: Source


BBB_MLP_EXAMPLE = Source(
    label="Bayes-by-backprop MLP-1024 example",
    citation=(
        "the classic Bayes-by-backprop MNIST example (one hidden layer of 1,024 ReLU units, "
        "KL weight 1e-3) after C. Blundell et al., Weight Uncertainty in Neural Networks, "
        "ICML 2015"
    ),
    url="https://arxiv.org/abs/1505.05424",
)
UNCERTAINTY_BASELINES = Source(
    label="Uncertainty Baselines README",
    citation="Z. Nado et al., Uncertainty Baselines, arXiv:2106.04015 (2021), MNIST LeNet-5 table",
    url="https://github.com/google/uncertainty-baselines",
)

#: Published MNIST figures by the report's dataset label (``<dataset>/<variant>``).
_CLASSIFICATION: dict[str, tuple[PublishedClassification, ...]] = {
    "mnist/mlp1024": (
        PublishedClassification("VI, MLP-1024", "mnist/mlp1024", 0.979, None, BBB_MLP_EXAMPLE),
    ),
    "mnist/lenet5": (
        PublishedClassification(
            "deterministic LeNet-5", "mnist/lenet5", 0.991, 0.037, UNCERTAINTY_BASELINES
        ),
        PublishedClassification("VI LeNet-5", "mnist/lenet5", 0.985, 0.048, UNCERTAINTY_BASELINES),
    ),
}


def published_classification_for(dataset: str) -> list[PublishedClassification]:
    """Published accuracy / NLL for a report's dataset label (``mnist/lenet5``, ...); empty
    for any other."""
    return list(_CLASSIFICATION.get(dataset, ()))


@dataclass(frozen=True)
class PublishedPruning:
    """Published test error (%) after removing a share of the weights, those with the smallest
    signal-to-noise ratio |mu| / sigma first, as ``(fraction removed, test error %)`` pairs."""

    model: str
    dataset: str
    test_error: tuple[tuple[float, float], ...]
    source: Source


BLUNDELL_PRUNING = Source(
    label="Blundell et al. 2015, Table 2",
    citation=(
        "C. Blundell, J. Cornebise, K. Kavukcuoglu and D. Wierstra, Weight Uncertainty in Neural "
        "Networks, ICML 2015, Table 2 (MNIST test error after removing weights by |mu|/sigma)"
    ),
    url="https://arxiv.org/abs/1505.05424",
)
#: Blundell et al.'s Table 2: test error (%) of their Bayes-by-backprop MNIST MLP (two hidden
#: layers of 1,200 units) with the given share of its weights removed.
_BLUNDELL_TABLE_2 = ((0.0, 1.24), (0.5, 1.24), (0.75, 1.24), (0.95, 1.29), (0.98, 1.39))
#: The MLP variants of the ``mnist`` suite (not LeNet-5: a convolutional network).
_PRUNING: dict[str, tuple[PublishedPruning, ...]] = {
    dataset: (
        PublishedPruning(
            "Bayes by Backprop, MLP 2 x 1200", dataset, _BLUNDELL_TABLE_2, BLUNDELL_PRUNING
        ),
    )
    for dataset in ("mnist", "mnist/mlp1024")
}


def published_pruning_for(dataset: str) -> list[PublishedPruning]:
    """Published test error after signal-to-noise pruning for a report's dataset label (the
    ``mnist`` suite's MLPs: ``mnist``, ``mnist/mlp1024``); empty for any other."""
    return list(_PRUNING.get(dataset, ()))
