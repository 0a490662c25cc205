"""A tiny performance suite end to end: every probe kind in its own process, then the report,
whose ratios must be the quotients of stored rows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ppl_bnn.bench.perf_suite import parse_perf_suite
from ppl_bnn.bench.record import read_records
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.report import render_report
from ppl_bnn.report.perf import rows_frame
from ppl_bnn.report.perf_ratios import floors, headline

pytestmark = pytest.mark.runtime(150)  # seconds on 2 cores: started first (tests/conftest.py)

TINY_NUTS = {"num_warmup": 5, "num_samples": 8, "max_tree_depth": 2}
RAW = {
    "name": "tinyperf",
    "kind": "perf",
    "repeats": 2,
    "timeout_s": 900,  # generous: the probes are timed, not the sweep; a loaded machine is slow
    "problems": {"sine": {"dataset": "sine", "model": {"hidden": [3]}}},
    # Only the method probe compiles a potential with torch.compile (it takes many seconds).
    "floor": {"problems": ["sine"], "torch_calls": 3, "jax_calls": 10, "kernel_draws": 4,
              "torch_variants": ["bare_eager", "bare_traced", "pyro_traced"]},
    "methods": [
        {"problem": "sine", "method": "svi", "backend": "numpyro",
         "options": {"num_steps": 20, "num_draws": 10}},
        {"problem": "sine", "method": "nuts", "backend": "pyro", "variant": "compiled",
         "options": TINY_NUTS, "budget_note": "tiny on purpose"},
    ],
    "overhead": {"problem": "sine", "nuts": TINY_NUTS, "svi": {"num_steps": 20}, "repeats": 1},
    "predict": {"problem": "sine", "draws": 20, "points": 50, "repeats": 1},
    "scaling": {"n": [40], "width": [3], "base_n": 40, "base_width": 3, "torch_calls": 2,
                "jax_calls": 5, "nuts": {**TINY_NUTS, "potential": "traced"}, "repeats": 1,
                "torch_variants": ["bare_eager"]},
    # The filled cache only: without one, each NumPyro cell compiles afresh (a minute more here).
    "throughput": {"cells": 2, "repeats": 1, "caches": ["warm"],
                   "svi": {"num_steps": 20, "num_draws": 10}, "nuts": TINY_NUTS},
    "compile_cache": {"problem": "sine", "repeats": 1, "methods": {"nuts": TINY_NUTS}},
}  # fmt: skip


@pytest.fixture(scope="module")
def perf_results(tmp_path_factory: pytest.TempPathFactory, jax_cache: str) -> Path:
    results = tmp_path_factory.mktemp("perf") / "tinyperf"
    # This process's JAX cache, as `ppl-bnn bench` gives its probes one: the probes share the
    # small programs every NumPyro fit compiles (the throughput and compile-cache probes still
    # run their own sweeps on caches of their own).
    summary = run_suite(parse_perf_suite(RAW), results, jobs=2, jax_cache=jax_cache)
    assert summary.ok, summary.failed_cells
    return results


def test_every_probe_stores_rows_with_repeats(perf_results: Path) -> None:
    records = {r["cell_id"]: r for r in read_records(perf_results)}
    assert set(records) == {
        "floor-sine",
        "method-sine-svi-numpyro-default",
        "method-sine-nuts-pyro-compiled",
        "overhead-sine-numpyro",
        "predict",
        "scaling-n40-width3",
        "throughput",
        "compile-cache-sine-numpyro",
    }
    for record in records.values():
        assert record["status"] == "ok", record.get("error")
        assert record["perf"], record["cell_id"]
        for entry in record["perf"]:
            finite = [v for v in entry["values"] if v is not None and math.isfinite(v)]
            assert entry["min"] == min(finite), (record["cell_id"], entry["quantity"])
    floor_rows = {(r["quantity"], r["variant"]): r for r in records["floor-sine"]["perf"]}
    assert len(floor_rows["grad_s", "bare_jit"]["values"]) == 2
    assert {("kernel_s_per_step", "nuts"), ("grad_s", "pyro_traced")} <= set(floor_rows)
    assert ("grad_s", "pyro_compiled") not in floor_rows
    scaling = {(r["quantity"], r["variant"]) for r in records["scaling-n40-width3"]["perf"]}
    assert ("grad_s", "bare_eager") in scaling and ("grad_s", "bare_traced") not in scaling
    nuts = {r["quantity"]: r for r in records["method-sine-nuts-pyro-compiled"]["perf"]}
    assert nuts["grad_s"]["mode"] == "compiled" and nuts["grad_s"]["median"] > 0
    assert records["method-sine-nuts-pyro-compiled"]["budget_note"] == "tiny on purpose"
    # The probe's thread budget (cores // jobs) sets both backends' parallelism.
    parallel = {r["backend"]: r["parallel"] for r in records["predict"]["perf"]}
    threads = records["predict"]["threads"]
    assert parallel == {
        "numpyro": f"host devices: {threads}",
        "pyro": f"torch threads: {threads}",
    }
    throughput = {
        (r["quantity"], r["cache"], r["variant"]): r for r in records["throughput"]["perf"]
    }
    quantities = ("sweep_wall_s", "cell_time_s", "jax_cache_hits")
    assert set(throughput) == {(q, "warm", f"jobs{jobs}") for q in quantities for jobs in (1, 2)}
    for jobs in (1, 2):
        # Cells run inside their sweep: one at a time with --jobs 1, two at once with 2.
        cell_times = throughput["cell_time_s", "warm", f"jobs{jobs}"]["values"]
        sweeps = throughput["sweep_wall_s", "warm", f"jobs{jobs}"]["values"]
        assert all(0 < c <= jobs * w for c, w in zip(cell_times, sweeps, strict=True))
        # The cache was filled for both thread counts: the NumPyro cells load their programs.
        assert all(h > 0 for h in throughput["jax_cache_hits", "warm", f"jobs{jobs}"]["values"])
    # The second process loads every program the first compiled into the empty cache.
    cache = {
        (r["quantity"], r["variant"]): r for r in records["compile-cache-sine-numpyro"]["perf"]
    }
    assert cache["xla_compiles", "cold"]["values"][0] > 0
    assert cache["xla_compiles", "warm"]["values"] == [0]
    assert cache["jax_cache_hits", "warm"]["values"][0] > cache["jax_cache_hits", "cold"]["min"]
    assert 0 < cache["compile_s", "warm"]["min"] < cache["fit_s", "warm"]["min"]


def test_perf_report_ratios_are_quotients_of_stored_rows(perf_results: Path) -> None:
    index = render_report(perf_results)
    html = index.read_text()
    frame = rows_frame(read_records(perf_results))
    f = floors(frame, "sine")["pyro"]
    nuts = frame[
        (frame["quantity"] == "grad_s") & (frame["probe"] == "method-sine-nuts-pyro-compiled")
    ]
    expected = float(nuts["median"].iloc[0]) / f.sampler
    ratios = {what: value for what, value, _ in headline(frame)}
    key = "Pyro NUTS (compiled) per gradient / floor (kernel + cheapest bare torch gradient)"
    assert ratios[key] == pytest.approx(expected)
    assert f.sampler == pytest.approx(f.kernel + f.bare)
    assert f.kernel > 0 and math.isnan(floors(frame, "sine")["numpyro"].kernel)
    compile_s = frame[frame["quantity"] == "compile_s"].set_index(["probe", "variant"])["median"]
    cold, warm = (compile_s["compile-cache-sine-numpyro", v] for v in ("cold", "warm"))
    key = (
        "NumPyro NUTS compile time in a new process, empty JAX cache / cache filled by the "
        "same fit in another process"
    )
    assert ratios[key] == pytest.approx(cold / warm)
    sections = ("Headline ratios", "Floors", "Overhead of fit", "Parallel cells", "Growth")
    for section in (*sections, "Compilation cache"):
        assert section in html
    assert "tiny on purpose" in html
    assert (perf_results / "figures" / "perf-cost.png").is_file()
    assert (perf_results / "results.csv").read_text().startswith("probe,")
