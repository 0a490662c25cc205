"""Every method called with its defaults, ``fit(model, method, backend=b, seed=0)``, on the UCI
regression sets of a data directory (split 0, standardised, 50 tanh units, the noise learned)
and on the offline ``digits`` set (50 tanh units, categorical).

For each (set, backend, method) it records whether the fit finished, its test log-likelihood
(per point, standardised units for regression), the constant predictor's (a Gaussian at the
training targets' mean and std; the training class frequencies) and MAP's, and prints one
Markdown table; ``--out`` also writes it as CSV.

    python benchmarks/defaults_audit.py --data-dir ../shared/data
    python benchmarks/defaults_audit.py --sets bostonHousing concrete --methods map swag
    python benchmarks/defaults_audit.py --methods mcdropout --option mcdropout.dropout_rate=0.05
    python benchmarks/defaults_audit.py --methods all --sets bostonHousing
"""

from __future__ import annotations

import argparse
import ast
import logging
import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ppl_bnn import BNN, configure_runtime, fit
from ppl_bnn.data import load_dataset
from ppl_bnn.data.dataset import Dataset
from ppl_bnn.methods import method_names

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
)


def _model_and_constant(data: Dataset) -> tuple[BNN, float]:
    """The audit's network on ``data``, and the constant predictor's test log-likelihood."""
    if data.task == "classification":
        model = BNN(data.x_train, data.y_train, hidden=(50,), likelihood="categorical",
                    num_classes=data.num_classes)  # fmt: skip
        counts = np.bincount(data.y_train, minlength=data.num_classes) + 1.0  # add-one: no log 0
        return model, float(np.log(counts / counts.sum())[data.y_test].mean())
    model = BNN(data.x_train, data.y_train, hidden=(50,), activation="tanh", noise="learned")
    return model, float(norm.logpdf(data.y_test, data.y_train.mean(), data.y_train.std()).mean())


def audit(
    sets: list[str],
    methods: list[str],
    backends: list[str],
    data_dir: str,
    options: dict[str, dict[str, object]] | None = None,
) -> pd.DataFrame:
    """The audit's rows; ``options``: method -> options that replace its defaults."""
    rows = []
    for name in sets:
        data = load_dataset(name, split=0, data_dir=data_dir)
        model, constant = _model_and_constant(data)
        for backend in backends:
            for method in methods:
                start = time.perf_counter()
                try:
                    chosen = (options or {}).get(method, {})
                    result = fit(model, method, backend=backend, seed=0, **chosen)
                    ll, error = float(result.predict(data.x_test).log_likelihood(data.y_test)), ""
                except Exception as err:  # a failure is a row of the table, named
                    ll, error = math.nan, f"{type(err).__name__}: {str(err)[:160]}"
                rows.append(
                    {"set": name, "backend": backend, "method": method, "test_ll": ll,
                     "constant_ll": constant, "seconds": time.perf_counter() - start,
                     "error": error}
                )  # fmt: skip
                logging.info("%s %s %s: %.3f %s", name, backend, method, ll, error)
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
        "--option", action="append", default=[], metavar="METHOD.NAME=VALUE",
        help="replace one default, e.g. mcdropout.dropout_rate=0.05 or map.keep=lowest (a Python "
        "literal, else a string)",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    configure_runtime(host_devices=1, torch_threads=os.cpu_count() or 1)
    methods = list(method_names()) if args.methods == ["all"] else args.methods
    frame = audit(args.sets, methods, args.backends, args.data_dir, _options(args.option))
    if args.out:
        frame.to_csv(args.out, index=False)
    columns = ["set", "backend", "method", "test_ll", "map_ll", "constant_ll", "beats_constant",
               "seconds", "error"]  # fmt: skip
    print(markdown(frame[columns]))


def _options(pairs: list[str]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        method, _, name = key.partition(".")
        if not (method and name and value):
            raise SystemExit(f"--option {pair!r}: expected METHOD.NAME=VALUE")
        try:
            out.setdefault(method, {})[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):  # a bare word: the string itself
            out.setdefault(method, {})[name] = value
    return out


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table, floats to 3 decimals."""

    def cell(value: object) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
