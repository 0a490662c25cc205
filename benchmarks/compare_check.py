"""``compare`` end to end on data the project does not ship, through both entry points.

scikit-learn's bundled wine data (178 wines, 13 measurements, 3 cultivars) becomes two CSV
files: a regression one (the alcohol content from the 12 other measurements) and a
classification one (the cultivar, as strings, from all 13). Each is compared twice with the
default methods, seeds and reference, 20 tanh units, one cell at a time (so that the overhead
can be read off): by ``ppl-bnn compare`` and by ``ppl_bnn.compare`` on the same file read with
``read_table``. The script prints each Summary, checks that both entry points gave the same
numbers, and prints where each run's time went (:mod:`compare_overhead`)::

    python benchmarks/compare_check.py --out /tmp/compare-check
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd
from compare_overhead import overhead  # benchmarks/, the script's own folder
from sklearn.datasets import load_wine

from ppl_bnn import BNN, Comparison, compare
from ppl_bnn.data import read_table

HIDDEN = 20
#: The three cultivars as string labels (the file's class column is text, as users' often is).
CULTIVARS = {0: "cultivar_a", 1: "cultivar_b", 2: "cultivar_c"}
#: What both entry points must agree on exactly (the fits' numbers, not their times).
NUMBERS = ("test_ll", "rmse", "crps", "coverage_90", "accuracy", "nll", "brier", "ece", "ref_w2",
           "ref_tv")  # fmt: skip


def write_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """The two CSV files, and each one's target column."""
    folder.mkdir(parents=True, exist_ok=True)
    wine = load_wine(as_frame=True).frame
    regression = folder / "wine-alcohol.csv"
    wine.drop(columns=["target"]).to_csv(regression, index=False)
    classes = wine.assign(cultivar=wine.pop("target").map(CULTIVARS))
    classification = folder / "wine-cultivar.csv"
    classes.to_csv(classification, index=False)
    return {"regression": (regression, "alcohol"), "classification": (classification, "cultivar")}


def by_python(path: Path, target: str, out: Path) -> Comparison:
    """``ppl_bnn.compare`` on the file as the command line reads it."""
    table = read_table(path, target=target)
    if table.task == "classification":
        model = BNN(table.x, table.y, hidden=(HIDDEN,), likelihood="categorical",
                    num_classes=len(table.classes))  # fmt: skip
    else:
        model = BNN(table.x, table.y, hidden=(HIDDEN,), noise="learned")
    # One cell at a time, as the command line runs: a cell's threads (2 here, 1 with two cells
    # at once) change the last bits of the BLAS sums in the Laplace's GGN.
    return compare(model, results_dir=out, name=path.stem, jobs=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for data and results")
    args = parser.parse_args()
    failures = []
    for task, (path, target) in write_files(args.out / "data").items():
        cli = args.out / f"{task}-cli"
        command = [sys.executable, "-m", "ppl_bnn.cli", "compare", str(path), "--target", target,
                   "--hidden", str(HIDDEN), "--jobs", "1", "--out", str(cli)]  # fmt: skip
        subprocess.run(command, check=True)
        python = by_python(path, target, args.out / f"{task}-python")
        ours, theirs = Comparison(cli).table, python.table
        columns = [c for c in NUMBERS if c in ours]
        same = ours[columns].equals(theirs[columns])
        if not same:
            failures.append(task)
        print(f"\n== {task}: {path.name}, target {target!r}")
        print(python.summary)
        print(f"same numbers from ppl-bnn compare and ppl_bnn.compare: {same}")
        print(pd.Series(overhead(cli)).to_string())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
