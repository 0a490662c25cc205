"""Suites with a study: a dataset's ``sweep`` of one method's option over several values."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ppl_bnn.bench.cell import Cell, sweep_value_text
from ppl_bnn.bench.record import read_records
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.bench.suite import SUITES_DIR, SuiteError, Sweep, load_suite, parse_suite
from ppl_bnn.report import render_report
from tests.bench.conftest import tiny_suite

BETAS = [1.0, 0.1, 1e-4]
SWEEP = {"method": "svi", "option": "kl_weight", "values": BETAS}
RAW = {
    "name": "study",
    "seeds": [3, 1],
    "backends": ["numpyro", "pyro"],
    "model": {"hidden": [5], "activation": "tanh"},
    "datasets": [
        {"name": "sine"},
        {
            "name": "sine",
            "variant": "beta",
            "model": {"hidden": [4, 4]},
            "options": {"svi": {"learning_rate": 0.03}, "svi.pyro": {"num_steps": 7}},
            "sweep": SWEEP,
            "no_reference": "a study",
        },
    ],
    "methods": {"svi": {"num_steps": 10, "kl_weight": 0.5}, "map": {"num_steps": 10}},
}


def _with_sweep(**changes: object) -> dict:
    raw = copy.deepcopy(RAW)
    raw["datasets"][1].update(changes)
    return raw


def test_a_sweep_runs_its_method_once_per_value_at_the_first_seed() -> None:
    suite = parse_suite(RAW)
    assert suite.datasets[1].sweep == Sweep("svi", "kl_weight", (1.0, 0.1, 1e-4))
    study = {c.cell_id: c for c in suite.cells(only={"dataset": {"sine/beta"}})}
    assert sorted(study) == sorted(
        f"sine-beta-split0-svi-{b}-seed3-kl_weight{v}"
        for b in ("numpyro", "pyro")
        for v in ("1.0", "0.1", "0.0001")
    )
    cell = study["sine-beta-split0-svi-pyro-seed3-kl_weight0.0001"]
    # The swept value overrides the suite's kl_weight; the dataset's other options apply.
    assert cell.options == {"num_steps": 7, "kl_weight": 1e-4, "learning_rate": 0.03}
    assert cell.sweep == "kl_weight" and cell.label == "sine/beta"
    assert cell.model == {"hidden": [4, 4], "activation": "tanh"}
    assert cell.config()["sweep"] == "kl_weight"
    # The plain listing keeps every method, backend and seed ("sine" selects both listings).
    assert len([c for c in suite.cells() if c.label == "sine"]) == 2 * 2 * 2
    assert len(suite.cells(only={"dataset": {"sine"}})) == 2 * 2 * 2 + len(study)
    assert len({c.config_hash() for c in study.values()}) == len(study)


def test_a_sweep_excludes_a_backend_and_keeps_its_reference_reason() -> None:
    suite = parse_suite(_with_sweep(exclude=["svi.pyro"]))
    cells = suite.cells(only={"dataset": {"sine/beta"}})
    assert {c.backend for c in cells} == {"numpyro"} and len(cells) == len(BETAS)
    assert suite.datasets[1].no_reference == "a study"


def test_the_swept_value_joins_the_id_and_the_config_only_when_set() -> None:
    plain = Cell(suite="s", dataset="sine", split=0, method="svi", backend="numpyro", seed=0)
    assert "sweep" not in plain.config()
    swept = Cell(**{**plain.to_dict(), "options": {"kl_weight": 0.001}, "sweep": "kl_weight"})
    assert swept.cell_id == "sine-split0-svi-numpyro-seed0-kl_weight0.001"
    assert Cell.from_dict(swept.to_dict()) == swept
    assert [sweep_value_text(v) for v in (1, 1.0, 1e-4, 1e-5, 0.3)] == [
        "1", "1.0", "0.0001", "1e-05", "0.3",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"sweep": "kl_weight"}, r"#2 sweep: must be a table such as"),
        ({"sweep": {**SWEEP, "steps": 3}}, r"#2 sweep: unknown keys \['steps'\]"),
        ({"sweep": {"method": "svi", "values": [1.0]}}, r"missing keys \['option'\]"),
        ({"sweep": {**SWEEP, "method": "nuts"}}, "method 'nuts' is no method of this suite"),
        ({"sweep": {**SWEEP, "option": "KL weight"}}, "option must be an option name"),
        ({"sweep": {**SWEEP, "option": 3}}, "option must be an option name"),
        ({"sweep": {**SWEEP, "values": []}}, "values must be a non-empty list of finite"),
        ({"sweep": {**SWEEP, "values": [1.0, "0.1"]}}, "values must be a non-empty list"),
        ({"sweep": {**SWEEP, "values": [True]}}, "values must be a non-empty list"),
        ({"sweep": {**SWEEP, "values": [float("nan")]}}, "values must be a non-empty list"),
        ({"sweep": {**SWEEP, "values": 0.1}}, "values must be a list, got 0.1"),
        ({"sweep": {**SWEEP, "values": [1, 1.0]}}, r"values must not repeat: \[1\]"),
        # Each value is checked by the method's own options class, on every backend.
        ({"sweep": {**SWEEP, "values": [1.0, -0.1]}}, "sine/beta svi on numpyro: .*kl_weight"),
        ({"sweep": {**SWEEP, "option": "kl_wieght"}}, "sine/beta svi on numpyro: .*kl_wieght"),
        ({"exclude": ["map"]}, r"fits 'svi' alone, .*got \['map'\]"),
        ({"options": {"map.pyro": {"num_steps": 3}}}, r"fits 'svi' alone, .*got \['map.pyro'\]"),
        ({"exclude": ["svi"]}, "exclude names the swept method 'svi' itself"),
        (
            {"options": {"svi.numpyro": {"kl_weight": 0.3}}},
            r"options \['svi.numpyro'\] set 'kl_weight', which the sweep sets",
        ),
    ],
)
def test_bad_sweeps_are_named(changes: dict, match: str) -> None:
    with pytest.raises(SuiteError, match=match):
        parse_suite(_with_sweep(**changes))


def test_the_default_suite_sweeps_beta_on_a_small_tanh_net_on_the_sine_set() -> None:
    suite = load_suite(SUITES_DIR / "default.toml")
    cells = suite.cells(only={"dataset": {"sine/beta"}})
    betas = ("1.0", "0.1", "0.01", "0.001", "0.0001")
    assert [c.cell_id for c in cells] == [
        f"sine-beta-split0-svi-{b}-seed0-kl_weight{v}" for b in ("numpyro", "pyro") for v in betas
    ]
    for cell in cells:
        assert cell.model["hidden"] == [10, 10] and cell.model["activation"] == "tanh"
        assert cell.options["num_steps"] == 2000 and cell.sweep == "kl_weight"
    job = next(j for j in suite.references() if j.cell.label == "sine/beta")
    assert job.no_reference
    # The contestants' cells are the same as without the study.
    assert all(c.sweep is None for c in suite.cells() if c.label != "sine/beta")


def test_a_tiny_sweep_runs_and_its_report_shows_the_study(tmp_path: Path) -> None:
    sweep = {"method": "svi", "option": "kl_weight", "values": [1.0, 0.01]}
    # Pyro: no compilation, so the two cells take seconds.
    datasets = [{"name": "sine", "variant": "beta", "sweep": sweep}]
    suite = tiny_suite(backends=["pyro"], datasets=datasets)
    results = tmp_path / "results"
    summary = run_suite(suite, results, jobs=2)
    assert summary.ok
    records = {r["cell_id"]: r for r in read_records(results)}
    assert sorted(records) == [
        "sine-beta-split0-svi-pyro-seed0-kl_weight0.01",
        "sine-beta-split0-svi-pyro-seed0-kl_weight1.0",
    ]
    for record in records.values():
        beta = record["config"]["options"]["kl_weight"]
        assert record["status"] == "ok" and record["info"]["kl_weight"] == beta
        assert record["config"]["sweep"] == "kl_weight"
    index = render_report(results, tmp_path / "report")
    assert (tmp_path / "report" / "figures" / "sine-beta-sweep-kl-weight.png").is_file()
    html = index.read_text(encoding="utf-8")
    assert "β sweep of svi on sine/beta" in html and "no contestant&#x27;s cells" in html
