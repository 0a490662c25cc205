"""Performance suites: the shipped one parses; bad ones are refused with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ppl_bnn.bench.cell import Probe, cell_from_dict
from ppl_bnn.bench.perf_suite import parse_perf_suite
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.bench.suite import SuiteError, load_suite


def _raw(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "p",
        "kind": "perf",
        "problems": {"sine": {"dataset": "sine", "model": {"hidden": [4]}}},
        "floor": {"problems": ["sine"], "torch_calls": 5},
        "methods": [{"problem": "sine", "method": "svi", "backend": "numpyro"}],
    }
    raw.update(changes)
    return raw


def test_shipped_perf_suite_expands_into_uniquely_named_probes():
    suite = load_suite("perf")
    assert suite.name == "perf"
    probes = suite.cells()
    names = [p.name for p in probes]
    assert len(names) == len(set(names))
    kinds = {p.kind for p in probes}
    assert kinds == {
        "floor",
        "method",
        "overhead",
        "predict",
        "scaling",
        "throughput",
        "compile_cache",
        "conv",
    }
    conv = {p.backend: p for p in probes if p.kind == "conv"}
    assert set(conv) == {"numpyro", "pyro"}
    assert conv["pyro"].params["batch_size"] == 128 and conv["pyro"].params["image_size"] == 28
    (cache,) = (p for p in probes if p.kind == "compile_cache")
    assert set(cache.params["methods"]) == {"svi", "nuts"} and cache.backend == "numpyro"
    scaling = {(p.params["n"], p.params["width"]) for p in probes if p.kind == "scaling"}
    assert {(500, 50), (5000, 50), (50000, 50), (500, 10), (500, 200)} == scaling
    only_pyro = suite.cells(only={"backend": {"pyro"}})
    assert only_pyro and all(p.backend == "pyro" for p in only_pyro)
    with pytest.raises(SuiteError, match=r"--backends: unknown backend 'PYRO'; .*numpyro, pyro"):
        suite.cells(only={"backend": {"PYRO"}})
    # fit's SVI starts where NumPyro's own AutoNormal does, not from a MAP warm start.
    (overhead,) = (p for p in probes if p.kind == "overhead")
    assert overhead.params["svi"] == {"num_steps": 3000, "init_loc": "uniform"}


def test_probe_round_trips_and_hashes_its_config():
    probe = parse_perf_suite(_raw()).cells()[0]
    again = cell_from_dict(probe.to_dict())
    assert isinstance(again, Probe) and again == probe
    changed = Probe(probe.suite, probe.name, probe.kind, {**probe.params, "torch_calls": 6})
    assert changed.config_hash() != probe.config_hash()


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"floor": {"problems": ["cosine"]}}, r"unknown problem 'cosine'; defined: \['sine'\]"),
        ({"floor": {"problem": ["sine"]}}, r"\[floor\]: unknown keys \['problem'\]"),
        ({"repeats": 0}, "repeats must be an integer >= 1, got 0"),
        ({"bogus": 1}, r"unknown keys \['bogus'\]"),
        (
            {
                "methods": [
                    {
                        "problem": "sine",
                        "method": "svi",
                        "backend": "numpyro",
                        "options": {"num_step": 3},
                    }
                ]
            },
            r"#1: .*num_step",
        ),
        (
            {"methods": [{"problem": "sine", "method": "svi", "backend": "stan"}]},
            "unknown backend 'stan'",
        ),
        ({"problems": {"sine": {"dataset": "nope"}}}, "unknown dataset 'nope'"),
        ({"floor": None, "methods": []}, "needs at least one probe"),
        (
            {"floor": {"problems": ["sine"], "torch_variants": ["bare_eager", "jax"]}},
            r"\[floor\]: torch_variants must be a non-empty list drawn from bare_eager, .*'jax'",
        ),
        ({"scaling": {"n": [40], "torch_variants": []}}, r"\[scaling\]: torch_variants must"),
        (
            {"throughput": {"caches": ["cold"]}},
            r"\[throughput\]: caches must be a non-empty list drawn from warm, none; got .*cold",
        ),
        (
            {"compile_cache": {"problem": "sine"}},
            r"\[compile_cache\]: methods must map method names to their options",
        ),
        (
            {"compile_cache": {"problem": "sine", "methods": {"svi": {"num_step": 3}}}},
            r"\[compile_cache\] methods.svi: .*num_step",
        ),
        (
            {"compile_cache": {"problem": "cosine", "methods": {"svi": {}}}},
            r"\[compile_cache\]: unknown problem 'cosine'",
        ),
        (
            {"overhead": {"problem": "sine", "svi": {"init_loc": "map"}}},
            r"\[overhead\] svi: init_loc must be 'uniform', the start of the PPL's own SVI .*'map'",
        ),
        ({"conv": {"image": 28}}, r"\[conv\]: unknown keys \['image'\]"),
        (
            {"conv": {"backends": ["stan"]}},
            r"\[conv\]: backends must be a non-empty list drawn from numpyro, pyro; got .*stan",
        ),
        ({"conv": {"steps": 0}}, r"\[conv\]: steps must be an integer >= 1, got 0"),
        ({"conv": {"image_size": 10}}, r"\[conv\]: image_size must be a multiple of 4"),
        (
            {"conv": {"images": 64, "batch_size": 128}},
            r"\[conv\]: batch_size \(128\) must not exceed images \(64\)",
        ),
        ({"conv": {"prior": "laplace"}}, r"\[conv\]: unknown prior 'laplace'; allowed: scale_"),
        (
            {"conv": {"options": {"num_steps": 5}}},
            r"\[conv\]: options \['num_steps'\] are set by the table itself",
        ),
        ({"conv": {"options": {"estimator": "dropout"}}}, r"\[conv\] options: .*dropout"),
        ({"name": "../perf"}, "name must be a plain file name"),
        ({"timeout_s": float("nan")}, "timeout_s must be a finite positive number, got nan"),
        (
            {"problems": {"sine": {"dataset": "sine", "model": {"activation": "swish"}}}},
            r"\[problems.sine\] model: unknown activation 'swish'",
        ),
        (
            {"problems": {"sine": {"dataset": "sine", "max_train": -3}}},
            r"\[problems.sine\]: max_train must be an integer >= 1, got -3",
        ),
    ],
)
def test_bad_perf_suites_are_refused(changes, match):
    raw = {k: v for k, v in _raw(**changes).items() if v is not None}
    with pytest.raises(SuiteError, match=match):
        parse_perf_suite(raw)


def test_perf_suite_refuses_a_dask_cluster_before_writing_anything(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"performance suite.*drop --dask-address"):
        run_suite(parse_perf_suite(_raw()), tmp_path / "p", dask_address="tcp://127.0.0.1:1")
    assert not (tmp_path / "p").exists()
