"""The conv probe end to end on tiny synthetic images, and its LeNet-5 helpers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn.bench import lenet
from ppl_bnn.bench.perf_suite import parse_perf_suite
from ppl_bnn.bench.record import read_records
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.report import render_report
from ppl_bnn.report.perf import conv_rows, rows_frame

pytestmark = pytest.mark.runtime(100)  # seconds on 2 cores: started first (tests/conftest.py)

RAW = {
    "name": "tinyconv",
    "kind": "perf",
    "repeats": 2,
    "timeout_s": 900,  # generous: a loaded machine is slow
    "conv": {
        "images": 24,
        "image_size": 8,
        "batch_size": 8,
        "steps": 3,
        "plain_steps": 2,
        "prior": "normal",
        "options": {"num_draws": 2},
    },
}


@pytest.fixture(scope="module")
def conv_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("perf") / "tinyconv"
    summary = run_suite(parse_perf_suite(RAW), results, jobs=1)
    assert summary.ok, summary.failed_cells
    return results


def test_conv_probe_times_plain_and_bayesian_steps_on_both_backends(conv_results: Path) -> None:
    records = {r["cell_id"]: r for r in read_records(conv_results)}
    assert set(records) == {"conv-lenet5-numpyro", "conv-lenet5-pyro"}
    for backend in ("numpyro", "pyro"):
        record = records[f"conv-lenet5-{backend}"]
        assert record["status"] == "ok", record.get("error")
        rows = {(r["quantity"], r["variant"]): r for r in record["perf"]}
        assert set(rows) == {
            *((q, v) for q in ("step_s", "compile_s") for v in ("plain", "flipout")),
            ("step_ratio", "flipout"),
        }
        for key in (("step_s", "plain"), ("step_s", "flipout"), ("compile_s", "flipout")):
            assert len(rows[key]["values"]) == 2 and rows[key]["min"] > 0, (backend, key)
        # Plain and Bayesian runs alternate; each repeat's ratio is its own quotient.
        ratios = np.divide(rows["step_s", "flipout"]["values"], rows["step_s", "plain"]["values"])
        assert rows["step_ratio", "flipout"]["values"] == pytest.approx(ratios)
        assert all(r["problem"] == "lenet5-synthetic-8x8" for r in record["perf"])
        assert all(r["backend"] == backend and r["batch_size"] == 8 for r in record["perf"])


def test_conv_report_ratio_and_epoch_are_formed_from_stored_rows(conv_results: Path) -> None:
    html = render_report(conv_results).read_text()
    frame = rows_frame(read_records(conv_results))
    entries = {e["backend"]: e for e in conv_rows(frame)}
    assert set(entries) == {"numpyro", "pyro"}
    for backend, entry in entries.items():
        part = frame[(frame["backend"] == backend) & (frame["quantity"] == "step_s")]
        step = part.set_index("variant")["median"]
        assert entry["ratio"] == pytest.approx(step["flipout"] / step["plain"])
        assert entry["epoch_s"] == pytest.approx(math.ceil(60_000 / 8) * step["flipout"])
        assert entry["steps_per_s"] == pytest.approx(1 / step["flipout"])
        ratios = frame[(frame["backend"] == backend) & (frame["quantity"] == "step_ratio")]
        assert entry["repeat_ratio"] == pytest.approx(float(ratios["median"].iloc[0]))
    assert "LeNet-5: Bayesian step against a plain step" in html


def test_mnist_images_fall_back_to_synthetic_images_offline(tmp_path: Path) -> None:
    x, y, source = lenet.mnist_images(5, data_dir=str(tmp_path))
    assert source == "synthetic" and x.shape == (5, 28, 28, 1) and x.dtype == np.float32
    assert y.shape == (5,) and set(np.unique(y)) <= set(range(10))
    x_small, _, source = lenet.mnist_images(3, data_dir=str(tmp_path), size=8)
    assert source == "synthetic" and x_small.shape == (3, 8, 8, 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n must be a positive integer, got 0"),
        ({"n": 2, "size": 10}, "size must be a multiple of 4"),
    ],
)
def test_mnist_images_refuse_bad_sizes(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lenet.mnist_images(**kwargs)


def test_lenet5_maps_mnist_images_to_ten_logits() -> None:
    shape = (28, 28, 1)
    for layer in lenet.lenet5():
        shape = layer.output_shape(shape)
    assert shape == (10,)
