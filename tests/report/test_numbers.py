"""Every number in the report comes from the stored files, computed as documented."""

from __future__ import annotations

import json
import math
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from ppl_bnn import metrics
from ppl_bnn.bench.cell import dataset_label
from ppl_bnn.bench.record import read_records
from ppl_bnn.report import fidelity, fmt, load_results, stats
from tests.report.helpers import row, section, tables

pytestmark = pytest.mark.runtime(20)  # seconds on 2 cores, with the other report modules


def test_csv_has_one_row_per_cell_with_the_stored_numbers(report_dir: Path, results_dir) -> None:
    frame = pd.read_csv(report_dir / "results.csv")
    records = read_records(results_dir)
    assert len(frame) == len(records)
    frame = frame.set_index("cell_id")
    for record in records:
        got = frame.loc[record["cell_id"]]
        assert got["status"] == record["status"]
        config = record["config"]
        assert got["dataset"] == dataset_label(config["dataset"], config.get("variant"))
        for key in ("method", "backend"):
            assert got[key] == config[key]
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
        ("sine", "svi", "pyro", "rmse_in"),
        ("sine", "svi", "pyro", "test_ll_out"),
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
    label = {"rmse_in": "RMSE _in", "test_ll_out": "test LL _out", "accuracy": "accuracy"}[metric]
    assert shown[label] == fmt.mean_se(mean, se)
    assert shown["n"] == "2" and shown["cells"] == "2 ok"


def test_single_value_has_no_standard_error(html: str, results_dir: Path) -> None:
    record = json.loads(
        (results_dir / "cells" / "sine-split0-map-pyro-seed0" / "record.json").read_text()
    )
    shown = row(tables(section(html, "dataset-sine"))[0], "map", "pyro")
    assert shown["RMSE _in"] == fmt.number(record["metrics"]["rmse_in"])
    assert "±" not in shown["RMSE _in"]


def test_epistemic_std_ratio_is_shown_beside_its_parts(html: str, results_dir: Path) -> None:
    def metrics_of(cell: str) -> dict:
        record = json.loads((results_dir / "cells" / cell / "record.json").read_text())
        return record["metrics"]

    nuts = metrics_of("sine-split0-nuts-numpyro-seed0")
    ratio = nuts["epistemic_std_out"] / nuts["epistemic_std_in"]
    assert nuts["epistemic_std_ratio"] == pytest.approx(ratio)
    shown = row(tables(section(html, "dataset-sine"))[0], "nuts", "numpyro")
    assert shown["epist. std _out/_in"] == fmt.number(nuts["epistemic_std_ratio"])
    assert shown["epist. std _out"] == fmt.number(nuts["epistemic_std_out"])
    # A point estimate has no spread: 0 / 0 is stored as null and shown blank.
    assert metrics_of("sine-split0-map-numpyro-seed0")["epistemic_std_ratio"] is None
    assert row(tables(section(html, "dataset-sine"))[0], "map", "numpyro")[
        "epist. std _out/_in"
    ] in ("", fmt.number(float("nan")))


def _stored(folder: Path, *names: str) -> tuple[np.ndarray, ...]:
    with h5py.File(folder / "predictions.nc", "r") as handle:
        return tuple(handle[n][...] for n in names)


def test_fidelity_comes_from_the_stored_draws_of_cell_and_reference(
    results_dir: Path, html: str
) -> None:
    reference = results_dir / "references" / "sine-split0"
    f_ref, s_ref, std_ref = _stored(reference, "fidelity_f", "fidelity_sigma", "test_std")
    frame = fidelity.fidelity_frame(load_results(results_dir)).set_index("cell_id")
    assert "sine-split0-sgld-numpyro-seed0" not in frame.index  # no stored predictions
    assert "sine-split1-svi-pyro-seed0" not in frame.index  # no reference on split 1
    table = tables(section(html, "reference-sine"))[1]
    for cell_id, method, backend in (
        ("sine-split0-map-numpyro-seed0", "map", "numpyro"),
        ("sine-split0-svi-pyro-seed0", "svi", "pyro"),
    ):
        cell = results_dir / "cells" / cell_id
        f, s, std, inside = _stored(cell, "fidelity_f", "fidelity_sigma", "test_std", "test_inside")
        assert f.shape[1] == 40  # all 40 test points are used: fewer than FIDELITY_POINTS
        w2 = metrics.mixture_w2(f, s, f_ref, s_ref)
        ks = metrics.mixture_ks(f, s, f_ref, s_ref)
        ratio = np.exp(np.mean(np.log(std / std_ref)))
        far = inside == 0
        ratio_out = np.exp(np.mean(np.log(std[far] / std_ref[far])))
        got = frame.loc[cell_id]
        assert got["ref_w2"] == pytest.approx(w2, rel=1e-12) and w2 > 0
        assert got["ref_ks"] == pytest.approx(ks, rel=1e-12)
        assert got["ref_std_ratio"] == pytest.approx(ratio, rel=1e-12)
        assert got["ref_std_ratio_out"] == pytest.approx(ratio_out, rel=1e-12)
        assert not got["ref_passed"]  # two chains: no floor
        assert np.isnan(got[fidelity.FLOOR_RATIO])
        # svi on pyro has two splits, only one with a reference: "(n=1)" follows its value
        assert row(table, method, backend)["W2 to ref."].split(" (")[0] == fmt.number(w2)


def test_classification_fidelity_is_agreement_and_total_variation(results_dir: Path) -> None:
    (p,) = _stored(results_dir / "cells" / "blobs-split0-svi-pyro-seed0", "test_mean_probs")
    (q,) = _stored(results_dir / "references" / "blobs-split0", "test_mean_probs")
    got = fidelity.fidelity_frame(load_results(results_dir)).set_index("cell_id")
    got = got.loc["blobs-split0-svi-pyro-seed0"]
    assert got["ref_agreement"] == pytest.approx(np.mean(p.argmax(1) == q.argmax(1)))
    assert got["ref_tv"] == pytest.approx(np.mean(0.5 * np.abs(p - q).sum(axis=1)))
    assert got["ref_passed"]
    floor = load_results(results_dir).references[("blobs", 0)].floor
    assert got[fidelity.FLOOR_RATIO] == pytest.approx(got["ref_tv"] / floor)


def test_backends_compare_identical_settings_only(results_dir: Path, html: str) -> None:
    backends = section(html, "backends")
    compared = tables(backends)[0]
    # map ran the same options on both backends: compared, one pair, so "too few pairs".
    shown = row(compared, "sine", "map", "test LL")
    assert shown["pairs"] == "1" and shown["verdict"] == "too few pairs"
    ll = {
        b: json.loads(
            (results_dir / "cells" / f"sine-split0-map-{b}-seed0" / "record.json").read_text()
        )["metrics"]["test_ll"]
        for b in ("pyro", "numpyro")
    }
    assert shown["pyro - numpyro"] == fmt.mean_se(ll["pyro"] - ll["numpyro"], None)
    # nuts ran a reduced budget on Pyro (and failed there): not a backend comparison.
    assert all(r[1] != "nuts" for r in compared[1:])
    # Sine's reference has no floor: distances to it are not compared either.
    assert all(r[2] != "W2 to ref." for r in compared[1:])


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


def test_elbo_split_is_the_last_checkpoint_of_the_training_curves(
    html: str, results_dir: Path
) -> None:
    """The ELBO split table beside the training curves: the last checkpoint's expected
    log-likelihood, KL and held-out log-likelihood, mean over the two splits of svi on Pyro,
    and ELBO = E[log lik] - beta KL."""
    curves = [
        r["curves"]["training"]
        for r in read_records(results_dir)
        if r["config"]["dataset"] == "sine" and "training" in (r.get("curves") or {})
    ]
    assert len(curves) == 2
    last = {k: np.mean([c[k][-1] for c in curves]) for k in ("expected_log_lik", "kl")}
    held_out = np.mean([c["held_out_ll"][-1] for c in curves])
    split = next(t for t in tables(section(html, "dataset-sine")) if "E_q[log lik]" in t[0])
    got = row(split, "svi", "pyro")
    assert got["E_q[log lik]"] == fmt.number(last["expected_log_lik"])
    assert got["KL"] == fmt.number(last["kl"])
    assert got["β"] == "1"
    assert got["ELBO"] == fmt.number(last["expected_log_lik"] - last["kl"])
    assert got["held-out LL"] == fmt.number(held_out)
    assert got["step"] == "200"
