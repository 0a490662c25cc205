"""Every number in the report comes from the stored files, computed as documented."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from ppl_bnn import metrics
from ppl_bnn.bench.record import read_records
from ppl_bnn.report import fmt, load_results, stats
from tests.report.helpers import row, section, tables


def test_csv_has_one_row_per_cell_with_the_stored_numbers(report_dir: Path, results_dir) -> None:
    frame = pd.read_csv(report_dir / "results.csv")
    records = read_records(results_dir)
    assert len(frame) == len(records)
    frame = frame.set_index("cell_id")
    for record in records:
        got = frame.loc[record["cell_id"]]
        assert got["status"] == record["status"]
        for key in ("dataset", "method", "backend"):
            assert got[key] == record["config"][key]
        assert got["split"] == record["config"]["split"]
        for name, value in record["metrics"].items():
            if value is None:
                assert math.isnan(got[name])
            else:
                assert got[name] == value, (record["cell_id"], name)
        for name, value in record["timings"].items():
            assert got[f"time_{name}"] == value
        for name, value in record["config"]["options"].items():
            assert got[f"options.{name}"] == value
    failed = frame.loc["sine-split0-nuts-pyro-seed0"]
    assert failed["error_type"] == "RuntimeError"
    assert failed["error_message"] == "Pyro NUTS blew up at warmup step 3"
    assert failed["budget_note"].startswith("Pyro NUTS costs")


@pytest.mark.parametrize(
    ("dataset", "method", "backend", "metric"),
    [
        ("sine", "svi", "pyro", "rmse"),
        ("sine", "svi", "pyro", "test_ll"),
        ("blobs", "svi", "pyro", "accuracy"),
    ],
)
def test_mean_and_standard_error_over_two_splits(
    results_dir: Path, html: str, dataset: str, method: str, backend: str, metric: str
) -> None:
    values = []
    for split in (0, 1):
        cell = results_dir / "cells" / f"{dataset}-split{split}-{method}-{backend}-seed0"
        values.append(json.loads((cell / "record.json").read_text())["metrics"][metric])
    a, b = values
    mean = (a + b) / 2
    se = abs(a - b) / 2  # sample std (ddof=1) of two values over sqrt(2)

    results = load_results(results_dir)
    frame = stats.group_stats(results.cells, [metric])
    got = frame[
        (frame["dataset"] == dataset) & (frame["method"] == method) & (frame["backend"] == backend)
    ].iloc[0]
    assert got[f"{metric}:n"] == 2
    assert got[f"{metric}:mean"] == pytest.approx(mean, rel=1e-12)
    assert got[f"{metric}:se"] == pytest.approx(se, rel=1e-12)

    table = tables(section(html, f"dataset-{dataset}"))[0]
    shown = row(table, method, backend)
    label = {"rmse": "RMSE", "test_ll": "test LL", "accuracy": "accuracy"}[metric]
    assert shown[label] == fmt.mean_se(mean, se)
    assert shown["n"] == "2" and shown["cells"] == "2 ok"


def test_single_value_has_no_standard_error(html: str, results_dir: Path) -> None:
    record = json.loads(
        (results_dir / "cells" / "sine-split0-map-pyro-seed0" / "record.json").read_text()
    )
    shown = row(tables(section(html, "dataset-sine"))[0], "map", "pyro")
    assert shown["RMSE"] == fmt.number(record["metrics"]["rmse"])
    assert "±" not in shown["RMSE"]


def _stored(results_dir: Path, cell_id: str) -> tuple[np.ndarray, np.ndarray]:
    with h5py.File(results_dir / "cells" / cell_id / "predictions.nc", "r") as handle:
        return handle["test_f"][...], handle["test_sigma"][...]


def test_reference_distances_come_from_the_stored_draws(results_dir: Path, html: str) -> None:
    f_ref, s_ref = _stored(results_dir, "sine-split0-nuts-numpyro-seed0")
    results = load_results(results_dir)
    distances = stats.reference_distances(results).set_index("cell_id")
    assert "sine-split0-nuts-numpyro-seed0" not in distances.index  # the reference itself
    assert "sine-split0-sgld-numpyro-seed0" not in distances.index  # no stored predictions
    table = tables(section(html, "reference-sine"))[0]
    for cell_id, method, backend in (
        ("sine-split0-map-numpyro-seed0", "map", "numpyro"),
        ("sine-split0-svi-pyro-seed0", "svi", "pyro"),
    ):
        f, s = _stored(results_dir, cell_id)
        assert f.shape[1] <= stats.MAX_REFERENCE_POINTS  # all 40 test points are used
        w2 = metrics.mixture_w2(f, s, f_ref, s_ref)
        ks = metrics.mixture_ks(f, s, f_ref, s_ref)
        assert distances.loc[cell_id, "w2"] == pytest.approx(w2, rel=1e-12)
        assert distances.loc[cell_id, "ks"] == pytest.approx(ks, rel=1e-12)
        assert w2 > 0
        assert row(table, method, backend)["W2"] == fmt.number(w2)
    # split 1 of svi.pyro has no reference cell on its split: it is not compared.
    assert "sine-split1-svi-pyro-seed0" not in distances.index
    assert not (distances["dataset"] == "blobs").any()


def test_backend_ratios_are_paired_on_split_and_seed(results_dir: Path, html: str) -> None:
    def total(cell_id: str) -> float:
        record = json.loads((results_dir / "cells" / cell_id / "record.json").read_text())
        return record["timings"]["total"]

    ratio = total("sine-split0-map-pyro-seed0") / total("sine-split0-map-numpyro-seed0")
    shown = row(tables(section(html, "backends"))[0], "sine", "map")
    assert shown["pairs"] == "1"
    assert shown["fit s pyro/numpyro"] == fmt.ratio(ratio)


def test_psis_loo_compares_methods_with_several_draws(results_dir: Path, html: str) -> None:
    compare = stats.loo_compare(load_results(results_dir))
    sine = compare[compare["dataset"] == "sine"]
    # map keeps one draw (no PSIS-LOO); svi on pyro has no other pyro method on its split.
    assert sorted(sine["method"]) == ["ensemble", "nuts"]
    assert set(sine["backend"]) == {"numpyro"}
    assert sorted(sine["rank"]) == [0, 1]
    assert "Every az.compare table" in section(html, "loo")


def test_number_formatting() -> None:
    assert fmt.number(0.012345) == "0.0123"
    assert fmt.number(3.0) == "3"
    assert fmt.number(2.5e-7) == "2.50e-07"
    assert fmt.number(None) == "" and fmt.number(float("nan")) == ""
    assert fmt.mean_se(0.123456, 0.00412) == "0.1235 ± 0.0041"
    assert fmt.mean_se(-2.5, float("nan")) == "-2.50"
    assert fmt.mean_se(1e-5, 3e-7) == "1.00e-05 ± 3.0e-07"
    assert fmt.ratio(12.345) == "12.3\u00d7"


def test_classification_reference_agreement_and_total_variation(
    results_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "results"
    shutil.copytree(results_dir, root)
    src = root / "cells" / "blobs-split0-svi-pyro-seed0"
    dst = root / "cells" / "blobs-split0-map-pyro-seed0"
    shutil.copytree(src, dst)
    record = json.loads((dst / "record.json").read_text())
    record["cell_id"] = dst.name
    record["config"]["method"] = "map"
    (dst / "record.json").write_text(json.dumps(record))
    suite = json.loads((root / "suite.json").read_text())
    suite["reference"] = "svi.pyro"
    (root / "suite.json").write_text(json.dumps(suite))

    distances = stats.reference_distances(load_results(root)).set_index("cell_id")
    same = distances.loc["blobs-split0-map-pyro-seed0"]
    assert same["agreement"] == 1.0 and same["total_variation"] == 0.0
    with h5py.File(src / "predictions.nc", "r") as handle:
        assert same["points"] == handle["test_mean_probs"].shape[0]
    # On sine the reference (svi.pyro) is compared with every other cell of its split.
    sine = distances[distances["dataset"] == "sine"]
    assert sorted(zip(sine["method"], sine["backend"], strict=True)) == [
        ("ensemble", "numpyro"),
        ("map", "numpyro"),
        ("map", "pyro"),
        ("nuts", "numpyro"),
    ]
