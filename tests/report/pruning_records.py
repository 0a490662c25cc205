"""Stored records of svi cells with known pruning curves (no fits): the MNIST MLP variants,
which have published pruning figures, LeNet-5 and digits, which do not."""

from __future__ import annotations

from pathlib import Path

from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.evaluate import PRUNE_FRACTIONS
from ppl_bnn.bench.record import write_record
from ppl_bnn.engine.registry import backend_names
from tests.report.builder import _record, write_suite

CONV = [{"kind": "flatten"}, {"kind": "dense", "units": 10}]
#: (dataset, variant, model) of the written cells.
SETS = (
    ("mnist", None, {"hidden": [400, 400]}),
    ("mnist", "mlp1024", {"hidden": [1024]}),
    ("mnist", "lenet5", {"layers": CONV}),
    ("digits", None, {"hidden": [8]}),
)
BACKENDS = backend_names()
SEEDS = (0, 1)


def pruned_accuracy(backend: str, seed: int) -> list[float]:
    """Test accuracy after pruning each of ``PRUNE_FRACTIONS``: 0.98 less 0.01 per fraction
    step, less 0.002 per seed, less 0.004 on Pyro."""
    base = 0.98 - 0.002 * seed - 0.004 * (backend == "pyro")
    return [base - 0.01 * i for i in range(len(PRUNE_FRACTIONS))]


def pruned_test_ll(backend: str, seed: int) -> list[float]:
    """Test log-likelihood after pruning: -0.1 less 0.05 per fraction step, less 0.01 per seed."""
    return [-0.1 - 0.05 * i - 0.01 * seed for i in range(len(PRUNE_FRACTIONS))]


def write_pruning_suite(root: Path) -> list[Cell]:
    """Every (set, backend, seed) as an ok svi cell with its pruning curve, and ``suite.json``."""
    cells = [
        Cell("tiny", name, 0, "svi", backend, seed, model=model, variant=variant)
        for name, variant, model in SETS
        for backend in BACKENDS
        for seed in SEEDS
    ]
    for cell in cells:
        curve = {
            "fraction": list(PRUNE_FRACTIONS),
            "test_ll": pruned_test_ll(cell.backend, cell.seed),
            "accuracy": pruned_accuracy(cell.backend, cell.seed),
        }
        scores = {"accuracy": curve["accuracy"][0], "nll": -curve["test_ll"][0]}
        cell_dir = root / "cells" / cell.cell_id
        cell_dir.mkdir(parents=True)
        write_record(cell_dir, _record(cell, metrics=scores, curves={"pruning": curve}))
    write_suite(root, cells)
    return cells
