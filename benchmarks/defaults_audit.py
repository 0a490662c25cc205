"""Every method called with its defaults, ``fit(model, method, backend=b, seed=0)``, on the UCI
regression sets of a data directory (split 0, standardised, 50 tanh units, the noise learned,
or known with ``--noise STD``), on the offline ``digits`` set (50 tanh units, categorical) and on
``digits-images``, the same digits as 8x8 images through a small convolutional network
(:data:`CONV_LAYERS`).

For each (set, backend, method) it records whether the fit finished, whether it diverged (a
sampler's chain that stopped at a non-finite step keeps its draws before it), its test
log-likelihood (per point, standardised units for regression), the constant predictor's (a
Gaussian at the training targets' mean and std; the training class frequencies) and MAP's, and
prints one Markdown table; ``--out`` also writes it as CSV.

With ``--tuned SUITE ...`` it also fits the same network with the options the first suite that
has the set gives the method there (split 0, seed 0, same backend), choosing them on the suite's
validation split where the suite tunes the method (:func:`ppl_bnn.bench.tuning.tune`): the
``tuned_ll`` column, the default's test LL against what the suites run.

    python benchmarks/defaults_audit.py --data-dir ../shared/data
    python benchmarks/defaults_audit.py --sets bostonHousing concrete --methods map swag
    python benchmarks/defaults_audit.py --methods mcdropout --option mcdropout.dropout_rate=0.05
    python benchmarks/defaults_audit.py --methods all --sets bostonHousing
    python benchmarks/defaults_audit.py --noise 0.1 --sets bostonHousing kin8nm
    python benchmarks/defaults_audit.py --tuned benchmarks/uci.toml benchmarks/default.toml
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.bench.cell import Cell, model_arguments
from ppl_bnn.bench.suite import Suite, load_suite
from ppl_bnn.bench.tuning import tune
from ppl_bnn.cli import method_options, option_pair
from ppl_bnn.data import load_dataset
from ppl_bnn.data.dataset import Dataset
from ppl_bnn.layers import Conv2d, Dense, Flatten, MaxPool2d
from ppl_bnn.methods import method_names
from ppl_bnn.methods.base import DivergedError

#: The baselines whose defaults a user of ``fit`` meets first (``--methods`` takes any).
BASELINES = ("map", "laplace", "swag", "mcdropout", "ensemble")
#: The UCI sets of the data directory that fit in minutes on 2 cores (protein does not).
SETS = (
    "bostonHousing",
    "concrete",
    "wine-quality-red",
    "kin8nm",
    "power-plant",
    "naval-propulsion-plant",
    "digits",
    "digits-images",
)
#: ``digits-images``' network: 8 3x3 ReLU filters, 2x2 max pooling, a dense softmax layer.
CONV_LAYERS = (Conv2d(8, 3, padding="same", activation="relu"), MaxPool2d(2), Flatten(), Dense(10))


def _load(name: str, data_dir: str) -> Dataset:
    if name == "digits-images":
        return load_dataset("digits", split=0, image=True)
    return load_dataset(name, split=0, data_dir=data_dir)


def _network(name: str, data: Dataset, noise: str | float) -> dict[str, object]:
    """The audit's network on ``data``, as a suite's ``model`` table."""
    if name == "digits-images":
        return {"layers": [layer.to_dict() for layer in CONV_LAYERS]}
    if data.task == "classification":
        return {"hidden": [50]}
    return {"hidden": [50], "activation": "tanh", "noise": noise}


def _constant_ll(data: Dataset) -> float:
    """The constant predictor's test log-likelihood: a Gaussian at the training targets' mean
    and std, or the training class frequencies (add-one: no log 0)."""
    if data.task == "classification":
        counts = np.bincount(data.y_train, minlength=data.num_classes) + 1.0
        return float(np.log(counts / counts.sum())[data.y_test].mean())
    return float(norm.logpdf(data.y_test, data.y_train.mean(), data.y_train.std()).mean())


def _suite_cell(
    suites: list[Suite], name: str, method: str, backend: str, data_dir: str
) -> Cell | None:
    """The first suite's split-0, seed-0 cell of ``method`` on ``name`` (its tuned contestant
    where it has one), or None where no suite runs it."""
    for suite in suites:
        if name not in suite.selectable()["dataset"] or backend not in suite.backends:
            continue
        if method not in suite.methods:
            continue
        only = {"dataset": {name}, "method": {method}, "backend": {backend}}
        cells = suite.cells(max_splits=1, data_dir=data_dir, only=only)
        cells = sorted((c for c in cells if c.seed == 0), key=lambda c: c.tune is None)
        if cells:
            return cells[0]
    return None


def _tuned_ll(cell: Cell, network: dict[str, object], data: Dataset) -> float:
    """Test LL of the audit's network fitted with ``cell``'s options (tuned where it tunes)."""
    cell = replace(cell, model=network)
    model, options = cell.model, cell.options
    if cell.tune is not None:
        chosen = tune(cell, data)
        model, options = chosen.model, chosen.options
        logging.info("%s: tuning chose %s", cell.cell_id, chosen.info["chosen"])
    bnn = BNN(data.x_train, data.y_train, **model_arguments(dict(model), data))
    result = fit(bnn, cell.method, backend=cell.backend, seed=0, **options)
    return float(result.predict(data.x_test).mean_log_predictive_density(data.y_test))


def audit(
    sets: list[str],
    methods: list[str],
    backends: list[str],
    data_dir: str,
    options: dict[str, dict[str, object]] | None = None,
    noise: str | float = "learned",
    suites: list[Suite] | None = None,
) -> pd.DataFrame:
    """The audit's rows; ``options``: method -> options that replace its defaults; ``noise``:
    the regression networks' noise (``"learned"`` or a known std, standardised units);
    ``suites``: whose options give the ``tuned_ll`` column (NaN where none runs the method)."""
    rows = []
    for name in sets:
        data = _load(name, data_dir)
        network = _network(name, data, noise)
        model = BNN(data.x_train, data.y_train, **model_arguments(network, data))
        constant = _constant_ll(data)
        for backend in backends:
            for method in methods:
                start = time.perf_counter()
                try:
                    chosen = (options or {}).get(method, {})
                    result = fit(model, method, backend=backend, seed=0, **chosen)
                    ll, error = (
                        float(result.predict(data.x_test).mean_log_predictive_density(data.y_test)),
                        "",
                    )
                    # A chain that diverged keeps its draws before it: finished, not working.
                    diverged = bool(result.info.get("diverged", False))
                except Exception as err:  # a failure is a row of the table, named
                    ll, error = math.nan, f"{type(err).__name__}: {str(err)[:160]}"
                    diverged = isinstance(err, DivergedError)
                seconds = time.perf_counter() - start
                cell = _suite_cell(suites or [], name, method, backend, data_dir)
                tuned = math.nan if cell is None else _tuned_ll(cell, network, data)
                rows.append(
                    {"set": name, "noise": noise if data.task == "regression" else "",
                     "backend": backend, "method": method, "test_ll": ll, "diverged": diverged,
                     "constant_ll": constant, "tuned_ll": tuned, "seconds": seconds,
                     "error": error}
                )  # fmt: skip
                logging.info("%s %s %s: %.3f (tuned %.3f) %s", name, backend, method, ll, tuned,
                             error)  # fmt: skip
    frame = pd.DataFrame(rows)
    map_ll = frame[frame["method"] == "map"].set_index(["set", "backend"])["test_ll"]
    keys = list(zip(frame["set"], frame["backend"], strict=True))
    frame["map_ll"] = [map_ll.get(key, math.nan) for key in keys]
    frame["finite"] = frame["test_ll"].map(math.isfinite)
    frame["beats_constant"] = frame["test_ll"] > frame["constant_ll"]
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("PPL_BNN_DATA", "../shared/data"))
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument(
        "--methods", nargs="+", default=list(BASELINES), help="names, or 'all' (every method)"
    )
    parser.add_argument("--backends", nargs="+", default=["numpyro", "pyro"])
    parser.add_argument("--out", type=Path, help="also write the table as CSV here")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1,
        help="torch threads (default: one per core; 1 where other jobs share the cores, since "
        "torch's threads wait on each other when one is descheduled)",
    )  # fmt: skip
    parser.add_argument(
        "--tuned", nargs="+", default=[], metavar="SUITE",
        help="also fit each method with these suites' options for the set (the first suite "
        "that has it; tuned on its validation split where the suite tunes it): tuned_ll",
    )  # fmt: skip
    parser.add_argument(
        "--noise", default="learned", type=lambda v: v if v == "learned" else float(v),
        help="the regression networks' noise: 'learned' (default) or a known std (standardised)",
    )  # fmt: skip
    parser.add_argument(
        "--option", type=option_pair, action="append", default=[], metavar="METHOD.NAME=VALUE",
        help="replace one default, e.g. mcdropout.dropout_rate=0.05 or map.keep=lowest (a Python "
        "literal, else a string)",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_runtime(host_devices=1, torch_threads=args.threads)
    methods = list(method_names()) if args.methods == ["all"] else args.methods
    suites = [load_suite(path) for path in args.tuned]
    frame = audit(
        args.sets, methods, args.backends, args.data_dir, method_options(args.option), args.noise,
        [s for s in suites if isinstance(s, Suite)],
    )  # fmt: skip
    if args.out:
        frame.to_csv(args.out, index=False)
    columns = ["set", "noise", "backend", "method", "test_ll", "diverged", "map_ll",
               "tuned_ll", "constant_ll", "beats_constant", "seconds", "error"]  # fmt: skip
    print(markdown(frame[columns]))


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table, floats to 3 decimals."""

    def cell(value: object) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
