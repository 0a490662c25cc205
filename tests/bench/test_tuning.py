"""Tuned contestants: the suite's ``tune`` tables, and the choice on a validation split carved
from each training set (never the test set), here with fake fits."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ppl_bnn.bench.cell import Cell, base_method, contestant_label
from ppl_bnn.bench.record import _jsonable
from ppl_bnn.bench.suite import SuiteError, load_suite, parse_suite
from ppl_bnn.bench.tuning import (
    MAX_COMBINATIONS,
    Tuning,
    TuningError,
    apply_settings,
    tune,
    tuning_split,
    validation_score,
)
from ppl_bnn.data import Dataset, load_dataset
from ppl_bnn.methods.base import DivergedError

GRID = {"noise": [0.3, 1.0], "num_steps": [10, 20]}
RAW: dict[str, Any] = {
    "name": "tuned",
    "seeds": [0, 1],
    "backends": ["numpyro", "pyro"],
    "model": {"hidden": [4]},
    "datasets": [{"name": "sine"}, {"name": "gap", "options": {"map": {"num_steps": 7}}}],
    "methods": {"map": {"num_steps": 15, "tune": {"grid": GRID}}, "svi": {"num_steps": 10}},
}


def _raw(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(RAW)
    raw.update(changes)
    return raw


def _with_tune(tune: Any) -> dict[str, Any]:
    raw = _raw()
    raw["methods"]["map"]["tune"] = tune
    return raw


def test_a_tune_table_adds_a_tuned_contestant_beside_the_untuned_one() -> None:
    suite = parse_suite(RAW)
    cells = {c.cell_id: c for c in suite.cells()}
    tuned = cells["gap-split0-map-tuned-pyro-seed1"]
    assert tuned.method == "map" and tuned.contestant == "map (tuned)"
    assert tuned.tune == {"grid": GRID, "validation_fraction": 0.2}
    # Its options are the untuned contestant's (the grid overrides them while tuning).
    plain = cells["gap-split0-map-pyro-seed1"]
    assert tuned.options == plain.options == {"num_steps": 7} and plain.tune is None
    assert tuned.config()["tune"] == tuned.tune and "tune" not in plain.config()
    assert Cell.from_dict(json.loads(json.dumps(tuned.to_dict()))) == tuned
    # Per (dataset, backend, seed): map, map (tuned) and svi.
    assert len(cells) == 2 * 2 * 2 * 3
    assert {c.contestant for c in cells.values()} == {"map", "map (tuned)", "svi"}
    # The tuned contestant is selected by its method or its label.
    assert len(suite.cells(only={"method": {"map (tuned)"}})) == 2 * 2 * 2
    assert len(suite.cells(only={"method": {"map"}})) == 2 * 2 * 2 * 2
    assert base_method(contestant_label("map", True)) == "map"


TOML = """
name = "tuned-example"
backends = ["numpyro"]
model = { hidden = [4] }

[[datasets]]
name = "diabetes"

[[datasets]]
name = "gap"
exclude = ["map.tuned"]

[methods.map]
num_steps = 100

[methods.map.tune]
grid = { noise = [0.3, 0.5, 1.0], prior_scale = [0.3, 1.0], num_steps = [1000, 4000] }
validation_fraction = 0.2
"""


def test_the_documented_toml_syntax_reads(tmp_path: Path) -> None:
    path = tmp_path / "tuned.toml"
    path.write_text(TOML)
    suite = load_suite(path)
    assert [c.cell_id for c in suite.cells()] == [
        "diabetes-split0-map-numpyro-seed0",
        "diabetes-split0-map-tuned-numpyro-seed0",
        "gap-split0-map-numpyro-seed0",
    ]
    tuned = suite.cells()[1]
    assert Tuning.from_dict(tuned.tune).grid == {
        "noise": (0.3, 0.5, 1.0), "prior_scale": (0.3, 1.0), "num_steps": (1000, 4000)
    }  # fmt: skip
    assert len(Tuning.from_dict(tuned.tune).combinations()) == 12


def test_an_untuned_suite_is_unchanged() -> None:
    raw = _raw()
    del raw["methods"]["map"]["tune"]
    plain = parse_suite(raw).cells()
    assert all(c.tune is None and c.contestant == c.method for c in plain)
    # The untuned contestant keeps its ids and config hashes when a tune table is added.
    with_tune = {c.cell_id: c.config_hash() for c in parse_suite(RAW).cells() if c.tune is None}
    assert with_tune == {c.cell_id: c.config_hash() for c in plain}
    first = Cell(suite="s", dataset="sine", split=0, method="map", backend="pyro", seed=0)
    assert first.cell_id == "sine-split0-map-pyro-seed0" and "tune" not in first.config()


def test_a_dataset_changes_the_grid_key_by_key_or_drops_the_tuned_contestant() -> None:
    raw = _raw()
    raw["datasets"][0]["options"] = {"map": {"tune": {"validation_fraction": 0.25}}}
    raw["datasets"][1]["exclude"] = ["map.tuned"]
    raw["datasets"].append(
        {"name": "diabetes", "options": {"svi": {"tune": {"grid": {"learning_rate": [0.01]}}}}}
    )
    suite = parse_suite(raw)
    by_label = {(c.label, c.contestant): c for c in suite.cells()}
    assert by_label[("sine", "map (tuned)")].tune == {"grid": GRID, "validation_fraction": 0.25}
    assert ("gap", "map (tuned)") not in by_label and ("gap", "map") in by_label
    assert by_label[("diabetes", "svi (tuned)")].tune == {
        "grid": {"learning_rate": [0.01]},
        "validation_fraction": 0.2,
    }
    assert suite.datasets[0].options == {"map": {}}


def test_a_dataset_can_run_a_method_tuned_only() -> None:
    raw = _raw()
    raw["datasets"][1]["exclude"] = ["map.untuned"]
    contestants = {(c.label, c.contestant) for c in parse_suite(raw).cells()}
    assert ("gap", "map (tuned)") in contestants and ("gap", "map") not in contestants
    assert {("sine", "map"), ("sine", "map (tuned)")} <= contestants


@pytest.mark.parametrize(
    ("exclude", "match"),
    [
        (["svi.untuned"], "exclude names svi.untuned, but 'svi' is not tuned here"),
        (["map.tuned", "map.untuned"], "exclude names both map.tuned and map.untuned"),
        (["map.retuned"], "names no backend .* or tuned / untuned"),
    ],
)
def test_bad_contestant_excludes_are_refused(exclude: list[str], match: str) -> None:
    raw = _raw()
    raw["datasets"][1]["exclude"] = exclude
    with pytest.raises(SuiteError, match=match):
        parse_suite(raw)


def test_a_tuned_noise_replaces_learned_noise_and_its_prior() -> None:
    model = {
        "hidden": [4],
        "noise": "learned",
        "noise_prior": {"kind": "gamma", "concentration": 6.0, "rate": 6.0},
    }
    cell = next(c for c in parse_suite(_raw(model=model)).cells() if c.tune)
    tuned = tune(cell, load_dataset("sine", split=0), fit_fn=FakeFit())
    assert tuned.model == {"hidden": [4], "noise": tuned.info["chosen"]["noise"]}


def test_a_learned_noise_in_the_grid_keeps_the_noise_and_its_prior() -> None:
    prior = {"kind": "gamma", "concentration": 6.0, "rate": 6.0}
    model = {"hidden": [4], "noise": "learned", "noise_prior": prior}
    raw = _raw(model=model)
    raw["methods"]["map"]["tune"] = {"grid": {"noise": ["learned", 0.3]}}
    cell = next(c for c in parse_suite(raw).cells() if c.tune)
    assert cell.tune is not None and cell.tune["grid"] == {"noise": ["learned", 0.3]}
    assert apply_settings(cell, {"noise": "learned"})[0] == model
    assert apply_settings(cell, {"noise": 0.3})[0] == {"hidden": [4], "noise": 0.3}


@pytest.mark.parametrize(
    ("grid", "match"),
    [
        (
            {"noise": ["learnt"]},
            r'grid noise must be a non-empty list of finite numbers or "learned"',
        ),
        (
            {"num_steps": ["learned"]},
            r"grid num_steps must be a non-empty list of finite numbers, ",
        ),
    ],
)
def test_learned_is_a_grid_value_of_noise_only(grid: dict[str, Any], match: str) -> None:
    with pytest.raises(SuiteError, match=match):
        parse_suite(_with_tune({"grid": grid}))


def test_a_study_is_never_tuned() -> None:
    raw = _raw()
    raw["datasets"][1]["sweep"] = {"method": "map", "option": "num_steps", "values": [5, 9]}
    raw["datasets"][1]["options"] = {}
    suite = parse_suite(raw)
    assert all(c.tune is None for c in suite.cells() if c.label == "gap")


@pytest.mark.parametrize(
    ("tune", "match"),
    [
        ("noise", r"\[methods.map.tune\]: tune must be a table"),
        ({"grid": GRID, "folds": 5}, r"\[methods.map.tune\]: unknown keys \['folds'\]"),
        ({}, "grid must be a non-empty table of settings"),
        ({"grid": {}}, "grid must be a non-empty table of settings"),
        ({"grid": [0.3]}, "grid must be a non-empty table of settings"),
        (
            {"grid": {"noise": [1.0], "nosie": [1.0]}},
            r"grid keys \['nosie'\] are neither model settings .* options of 'map' \(.*num_steps",
        ),
        ({"grid": {"noise": []}}, "grid noise must be a non-empty list of finite numbers"),
        ({"grid": {"noise": 0.3}}, "grid noise must be a non-empty list of finite numbers"),
        ({"grid": {"noise": [0.3, math.inf]}}, "grid noise must be a non-empty list of finite"),
        ({"grid": {"noise": [math.nan]}}, "grid noise must be a non-empty list of finite"),
        ({"grid": {"noise": [True]}}, "grid noise must be a non-empty list of finite"),
        ({"grid": {"noise": ["0.3"]}}, "grid noise must be a non-empty list of finite"),
        ({"grid": {"noise": [0.3, 0.3]}}, r"grid noise repeats a value: \[0.3, 0.3\]"),
        (
            {"grid": {"noise": [0.1 * k for k in range(1, 6)], "num_steps": list(range(1, 14))}},
            f"grid has 65 combinations, more than {MAX_COMBINATIONS}",
        ),
        ({"grid": GRID, "validation_fraction": 0.0}, r"validation_fraction must be .* \(0, 1\)"),
        ({"grid": GRID, "validation_fraction": 1.0}, r"validation_fraction must be .* \(0, 1\)"),
        ({"grid": GRID, "validation_fraction": "0.2"}, r"validation_fraction must be a number"),
        # Every combination is checked by the method's options class and the model spec.
        ({"grid": {"num_steps": [10, 0]}}, r"sine map \(tuned\) on numpyro tuned with .*num_steps"),
        ({"grid": {"noise": [0.3, -1.0]}}, r"sine map \(tuned\) on numpyro tuned with .*noise"),
        ({"grid": {"prior_scale": [0.0]}}, r"sine map \(tuned\) on numpyro tuned with"),
    ],
)
def test_bad_tune_tables_are_refused_naming_the_suite_entry(tune: Any, match: str) -> None:
    with pytest.raises(SuiteError, match=match):
        parse_suite(_with_tune(tune))


def test_tune_settings_that_do_not_fit_the_dataset_or_the_suite_are_refused() -> None:
    raw = _raw()
    raw["datasets"].append({"name": "digits"})
    with pytest.raises(SuiteError, match=r"digits map \(tuned\) on numpyro: grid noise .*"):
        parse_suite(raw)
    raw["datasets"][-1]["exclude"] = ["map.tuned"]
    assert not [c for c in parse_suite(raw).cells() if c.label == "digits" and c.tune]
    raw = _raw(model={"hidden": [4], "prior": {"kind": "normal", "scale": 1.0}})
    raw["methods"]["map"]["tune"] = {"grid": {"prior_scale": [0.5, 1.0]}}
    with pytest.raises(SuiteError, match="give prior or prior_scale, not both"):
        parse_suite(raw)
    raw = _raw()
    raw["methods"]["map"]["pyro"] = {"tune": {"grid": GRID}}
    with pytest.raises(SuiteError, match=r"\[methods.map.pyro\]: tune is set for a method on"):
        parse_suite(raw)
    raw = _raw()
    raw["datasets"][0]["options"] = {"map.pyro": {"tune": {"grid": GRID}}}
    with pytest.raises(SuiteError, match=r"#1: options 'map.pyro' set tune"):
        parse_suite(raw)
    raw = _raw()
    raw["datasets"][0]["exclude"] = ["svi.tuned"]
    with pytest.raises(SuiteError, match=r"exclude names svi.tuned, but 'svi' is not tuned here"):
        parse_suite(raw)
    raw = _raw()
    raw["datasets"][0]["options"] = {"map": {"tune": "yes"}}
    with pytest.raises(SuiteError, match="options 'map' tune must be a table"):
        parse_suite(raw)
    raw = _raw()
    raw["datasets"][0]["exclude"] = ["map.tunde"]
    with pytest.raises(SuiteError, match=r"'map.tunde' names no backend .* or tuned"):
        parse_suite(raw)
    raw = _raw()
    raw["datasets"][1]["sweep"] = {"method": "map", "option": "num_steps", "values": [5]}
    raw["datasets"][1]["options"] = {"map": {"tune": {"grid": GRID}}}
    with pytest.raises(SuiteError, match=r"a study .* is not tuned"):
        parse_suite(raw)


# --- choosing on the validation split, with fake fits --------------------------------------


def _toy(n_train: int = 40, n_test: int = 10) -> Dataset:
    """Training inputs in [0, 1], test inputs in [10, 11] (original units): a test point shows."""
    rng = np.random.default_rng(0)
    x_train, x_test = rng.uniform(0, 1, (n_train, 1)), rng.uniform(10, 11, (n_test, 1))
    return Dataset(
        name="toy",
        task="regression",
        split=0,
        x_train=x_train,
        y_train=rng.normal(size=n_train),
        x_test=x_test,
        y_test=rng.normal(size=n_test),
        num_classes=None,
        y_mean=0.0,
        y_std=1.0,
        x_mean=np.zeros(1),
        x_std=np.ones(1),
    )


def _cell(grid: dict[str, list[Any]], **changes: Any) -> Cell:
    tune = {"grid": grid, "validation_fraction": 0.25}
    fields = {"method": "map", "backend": "pyro", "seed": 2, "split": 4, "model": {"hidden": [3]}}
    return Cell(suite="s", dataset="toy", tune=tune, **{**fields, **changes})


class FakeFit:
    """Stands in for :func:`ppl_bnn.fit`: records what it is given; each result predicts
    N(0, noise^2), so the validation score is known and depends on the noise alone."""

    def __init__(self, broken: set[float] = frozenset(), flagged: set[float] = frozenset()) -> None:
        self.calls: list[dict[str, Any]] = []
        self.predicted: list[np.ndarray] = []
        self.broken, self.flagged = broken, flagged

    def __call__(self, model: Any, method: str, **kwargs: Any) -> Any:
        noise = model.spec.noise
        self.calls.append({"x": model.x, "y": model.y, "method": method, "noise": noise, **kwargs})
        if noise in self.broken:
            raise DivergedError("loss is nan at step 3", method=method, step=3)

        def predict(x: np.ndarray) -> Any:
            self.predicted.append(x)
            return SimpleNamespace(f=np.zeros((2, len(x), 1)), noise_std=np.full(2, noise))

        info = {"diverged": True, "diverged_at_step": 4} if noise in self.flagged else {}
        return SimpleNamespace(predict=predict, info=info, timings={"compile": 0.0})


def _expected(data: Dataset, noise: float) -> float:
    """Mean log N(y | y_mean, (noise y_std)^2) over the validation points in original units
    (the fake's prediction, 0 with std ``noise`` in standardised units)."""
    val = tuning_split(_cell({"noise": [1.0]}), data).data
    y, sd = val.y_to_original(val.y_test) - val.y_mean, noise * val.y_std
    return float(np.mean(-0.5 * (y / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)))


def test_tuning_fits_see_only_the_fit_part_and_score_on_the_validation_part() -> None:
    data, fake = _toy(), FakeFit()
    cell = _cell({"noise": [0.5, 1.0], "learning_rate": [0.01, 0.02]})
    tuned = tune(cell, data, fit_fn=fake)
    split = tuning_split(cell, data)
    fit_rows, val_rows = split.fit_indices, split.validation_indices
    assert len(val_rows) == 10 and not set(fit_rows) & set(val_rows)
    assert len(fake.calls) == 4 and len(fake.predicted) == 4
    carved = split.data
    for call, x_val in zip(fake.calls, fake.predicted, strict=True):
        # In original units: the fit part of the training set, never a test input (>= 10).
        # (The model holds its inputs in float32.)
        fit_x = carved.x_to_original(call["x"])
        np.testing.assert_allclose(fit_x, data.x_train[fit_rows], rtol=1e-5)
        np.testing.assert_allclose(carved.x_to_original(x_val), data.x_train[val_rows])
        assert "validation" not in call and call["seed"] == 2 and call["backend"] == "pyro"
    # Every combination, model settings in the model and options passed to the fit.
    assert [(c["noise"], c["learning_rate"]) for c in fake.calls] == [
        (0.5, 0.01), (0.5, 0.02), (1.0, 0.01), (1.0, 0.02)
    ]  # fmt: skip
    # The final settings: the chosen ones in place of the cell's own.
    assert tuned.model == {"hidden": [3], "noise": tuned.info["chosen"]["noise"]}
    assert tuned.options == {"learning_rate": tuned.info["chosen"]["learning_rate"]}
    assert tuned.info["n_fit"] == 30 and tuned.info["n_validation"] == 10
    assert tuned.seconds >= sum(s["seconds"] for s in tuned.info["scores"])


def test_the_validation_split_is_fixed_by_the_cells_seed_and_split_on_every_backend() -> None:
    data = _toy()
    held_out = tuning_split(_cell({"noise": [1.0]}), data).validation_indices
    same = tuning_split(_cell({"noise": [2.0]}, backend="numpyro"), data).validation_indices
    np.testing.assert_array_equal(held_out, same)
    for other in ({"seed": 3}, {"split": 5}):
        moved = tuning_split(_cell({"noise": [1.0]}, **other), data).validation_indices
        assert not np.array_equal(held_out, moved)


def test_the_chosen_combination_is_the_argmax_of_the_scores_and_the_first_of_a_tie() -> None:
    data = _toy()
    tuned = tune(_cell({"num_steps": [5, 9], "noise": [0.2, 0.9, 3.0]}), data, fit_fn=FakeFit())
    scores = tuned.info["scores"]
    for entry in scores:
        assert entry["score"] == pytest.approx(_expected(data, entry["settings"]["noise"]))
        assert entry["status"] == "ok" and entry["error"] is None
    best = max(s["score"] for s in scores)
    # num_steps does not change the fake's score: the first of the tied combinations wins.
    assert tuned.info["chosen"] == {"num_steps": 5, "noise": 0.9}
    assert scores[[s["settings"] for s in scores].index(tuned.info["chosen"])]["score"] == best
    assert tuned.info["grid"] == {"num_steps": [5, 9], "noise": [0.2, 0.9, 3.0]}
    assert tuned.info["validation_fraction"] == 0.25


def test_a_combination_that_breaks_down_scores_minus_infinity() -> None:
    data = _toy()
    tuned = tune(_cell({"noise": [0.9, 0.2]}), data, fit_fn=FakeFit(broken={0.9}))
    broken, kept = tuned.info["scores"]
    assert broken["score"] == -math.inf and broken["status"] == "diverged"
    assert broken["error"] == "DivergedError: loss is nan at step 3"
    assert kept["score"] > -math.inf and tuned.info["chosen"] == {"noise": 0.2}
    # Stored as null in the record's JSON.
    assert _jsonable(tuned.info)["scores"][0]["score"] is None
    # A fit that reports a divergence (keeping finite draws) counts as broken down too.
    flagged = tune(_cell({"noise": [0.9, 0.2]}), data, fit_fn=FakeFit(flagged={0.9}))
    first = flagged.info["scores"][0]
    assert first["score"] == -math.inf and first["error"] == "the fit reports a divergence"
    assert flagged.info["chosen"] == {"noise": 0.2}
    with pytest.raises(TuningError, match="every combination of the tuning grid broke down"):
        tune(_cell({"noise": [0.9, 0.2]}), data, fit_fn=FakeFit(broken={0.9, 0.2}))


def test_non_finite_predictions_score_minus_infinity() -> None:
    data = _toy()
    prediction = SimpleNamespace(f=np.full((2, 10, 1), np.nan), noise_std=np.ones(2))
    result = SimpleNamespace(predict=lambda x: prediction)
    carved = tuning_split(_cell({"noise": [1.0]}), data).data
    assert validation_score(result, carved) == -math.inf


def test_noise_is_not_tuned_on_a_classification_set() -> None:
    data = load_dataset("digits", split=0, max_train=30)
    with pytest.raises(ValueError, match="noise is tuned, but digits is a classification set"):
        tune(_cell({"noise": [1.0]}), data, fit_fn=FakeFit())
    with pytest.raises(ValueError, match="has no tuning grid"):
        tune(Cell(suite="s", dataset="toy", split=0, method="map", backend="pyro", seed=0), data)


def test_a_classification_score_is_the_mean_log_probability_of_the_label() -> None:
    data = load_dataset("digits", split=0, max_train=30)
    carved = tuning_split(_cell({"learning_rate": [0.1]}), data).data
    probs = np.full((3, carved.n_test, 10), 0.1)
    probs[0, :, :] = 0.0
    probs[0, np.arange(carved.n_test), carved.y_test] = 1.0
    result = SimpleNamespace(predict=lambda x: SimpleNamespace(draws=probs))
    assert validation_score(result, carved) == pytest.approx(np.log((1.0 + 0.1 + 0.1) / 3))


def test_tuning_round_trips_its_plain_form() -> None:
    tuning = Tuning({"noise": (0.3, 1.0), "num_steps": (10,)}, 0.3)
    assert Tuning.from_dict(tuning.to_dict()) == tuning
    assert tuning.combinations() == [
        {"noise": 0.3, "num_steps": 10},
        {"noise": 1.0, "num_steps": 10},
    ]
