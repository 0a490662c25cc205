"""Refusals, selective classification and the published MNIST figures, from tiny stored records
of two variants of one dataset (no fits: the predictions are written by hand)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from ppl_bnn import metrics
from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.record import PREDICTIONS_FILE, write_record
from ppl_bnn.report import fmt, render_report
from ppl_bnn.report.load import load_results
from ppl_bnn.report.refusal import refusal_table, selective_figure
from tests.report.builder import _record, write_suite
from tests.report.helpers import row, section, tables

N = 40


def _probs(confidence: np.ndarray, labels: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Ten-class probabilities with the given largest probability, on the label where ``right``
    and on the next class otherwise."""
    probs = np.tile(((1 - confidence) / 9)[:, None], (1, 10))
    top = np.where(right, labels, (labels + 1) % 10)
    probs[np.arange(labels.size), top] = confidence
    return probs


def _write(root: Path, cell: Cell, seed: int) -> dict[str, np.ndarray]:
    """A cell whose test confidences run from 0.1 to 1 (errors on the least confident quarter),
    OOD confidences from 0.1 to 0.6 and noise confidences 0.1 (seed 0) or 0.25 (seed 1) on
    three quarters and 0.9 on the rest."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, N)
    confidence = np.linspace(0.1, 1.0, N)
    probs = _probs(confidence, labels, right=np.arange(N) >= N // 4)
    data = {
        "test_y": labels,
        "test_mean_probs": probs,
        "ood_p_max": np.linspace(0.1, 0.6, N),
        "noise_p_max": np.where(np.arange(N) < 3 * N // 4, 0.1 + 0.15 * seed, 0.9),
    }
    cell_dir = root / "cells" / cell.cell_id
    cell_dir.mkdir(parents=True)
    xr.Dataset(
        {
            "test_y": (("test",), labels),
            "test_mean_probs": (("test", "class"), probs),
            "ood_p_max": (("ood",), data["ood_p_max"]),
            "noise_p_max": (("noise",), data["noise_p_max"]),
        }
    ).to_netcdf(cell_dir / PREDICTIONS_FILE, engine="h5netcdf")
    scores = {"accuracy": metrics.accuracy(probs, labels), "nll": 0.1 + 0.01 * seed}
    files = {"predictions": PREDICTIONS_FILE}
    write_record(cell_dir, _record(cell, metrics=scores, files=files))
    return data


@pytest.fixture(scope="module")
def mnist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("mnist")
    cells = [
        Cell("tiny", "mnist", 0, "svi", backend, seed, variant=variant)
        for variant in ("lenet5", "mlp1024")
        for backend in ("numpyro", "pyro")
        for seed in (0, 1)
    ]
    written = [_write(root, cell, cell.seed) for cell in cells]
    write_suite(root, cells)
    return root, written


def test_variants_are_reported_as_datasets_of_their_own(mnist) -> None:
    root, _ = mnist
    results = load_results(root)
    assert results.datasets() == ["mnist/lenet5", "mnist/mlp1024"]
    assert set(results.cells["cell_id"]) >= {"mnist-lenet5-split0-svi-pyro-seed1"}


def test_refusal_rates_are_pooled_from_the_stored_confidences(mnist) -> None:
    root, written = mnist
    table = refusal_table(load_results(root), "mnist/lenet5")
    assert table is not None
    by_group = {(r[0], r[1]): r for r in table.rows}
    # Test confidences linspace(0.1, 1, 40): those below 0.2 are the first 5 of 40.
    test = np.mean(np.linspace(0.1, 1.0, N) < 0.2)
    ood = np.mean(np.linspace(0.1, 0.6, N) < 0.2)
    noise = np.mean(np.concatenate([w["noise_p_max"] for w in written[:2]]) < 0.2)
    assert test == 5 / 40 and noise == 0.375  # 30 of seed 0's 40, none of seed 1's
    expected = tuple(fmt.number(100 * v, 3) + "%" for v in (test, ood, noise))
    assert by_group[("svi", "numpyro")][2:] == ("2", *expected)


def test_selective_curve_panels_one_per_method(mnist) -> None:
    root, _ = mnist
    fig = selective_figure(load_results(root), "mnist/mlp1024")
    assert fig is not None and fig.name == "mnist-mlp1024-selective"
    assert fig.png.startswith(b"\x89PNG")


def test_the_report_shows_refusals_and_published_figures(mnist, tmp_path: Path) -> None:
    root, _ = mnist
    html = render_report(root, tmp_path / "out").read_text(encoding="utf-8")
    refusals = tables(section(html, "mnist-lenet5-refusal"))[0]
    assert refusals[0][2:] == [
        "cells",
        "refused: test inputs",
        "refused: OOD set",
        "refused: uniform noise",
    ]
    assert 'id="fig-mnist-lenet5-selective"' in section(html, "mnist-lenet5-refusal")
    assert "dataset-mnist-mlp1024" in html
    lenet = tables(section(html, "mnist-lenet5-published"))[0]
    assert row(lenet, "deterministic LeNet-5")["source"] == "Uncertainty Baselines README"
    assert (row(lenet, "VI LeNet-5")["accuracy"], row(lenet, "VI LeNet-5")["NLL"]) == (
        "0.985",
        "0.048",
    )
    assert row(lenet, "deterministic LeNet-5")["NLL"] == "0.037"
    assert row(lenet, "svi · pyro")["source"] == "this suite"
    mlp = tables(section(html, "mnist-mlp1024-published"))[0]
    assert row(mlp, "VI, MLP-1024")["source"] == "Bayes-by-backprop MLP-1024 example"
    assert row(mlp, "VI, MLP-1024")["accuracy"] == "0.979"
