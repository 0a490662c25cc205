"""``compare`` and ``ppl-bnn compare``: arguments checked before anything is written, the suite
they build, and one small comparison run through both entry points with the same numbers."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes, load_digits

from ppl_bnn import BNN, Comparison, compare, layers, priors
from ppl_bnn.bench.cell import model_arguments, model_table
from ppl_bnn.cli import main
from ppl_bnn.compare import AUTO_REFERENCE_WEIGHTS, plan_comparison
from ppl_bnn.comparison import UnitsUnknownWarning, Verdict
from ppl_bnn.data.dataset import Dataset
from ppl_bnn.data.splits import read_tables
from ppl_bnn.reference import PREDICTIONS_FILE
from ppl_bnn.report.recommend import Basis, Grade, Recommendation, Standing
from ppl_bnn.report.reference_entries import ReferenceEntry
from ppl_bnn.results import META_FILE, FitResult

pytestmark = pytest.mark.runtime(45)  # seconds on 2 cores: started first (tests/conftest.py)

#: Short fits: the point is the plumbing, not the posterior.
FAST = {"map": {"num_steps": 60}, "svi": {"num_steps": 60, "num_draws": 20}}


def _data(n: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    return x, x[:, 0] - 0.5 * x[:, 1] + 0.1 * rng.normal(size=n)


def _model(hidden: tuple[int, ...] = (4,)) -> BNN:
    return BNN(*_data(), hidden=hidden, noise="learned")


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"model": "not a model"}, TypeError, "compare takes a ppl_bnn.BNN"),
        ({"methods": ["map", "nope"]}, ValueError, r"unknown methods \['nope'\]"),
        ({"methods": []}, ValueError, "methods must be a non-empty list"),
        ({"methods": ["map", "map"]}, ValueError, "methods must be distinct"),
        ({"backends": ["tensorflow"]}, ValueError, r"unknown backends \['tensorflow'\]"),
        ({"seeds": 0}, ValueError, "seeds must be a positive integer"),
        ({"seeds": [0, 0]}, ValueError, "seeds must be distinct"),
        ({"seeds": [-1]}, ValueError, "seeds must be a count, a list of non-negative integers or"),
        ({"seeds": "many"}, ValueError, "seeds must be a count, a list"),
        ({"splits": 0}, ValueError, "splits must be a positive integer"),
        ({"test_fraction": 1.0}, ValueError, r"test_fraction must be in \(0, 1\)"),
        ({"reference": "always"}, ValueError, 'reference must be "auto", True, False'),
        ({"reference": {"num_chain": 2}}, TypeError, "num_chain"),
        ({"tune": "grid"}, ValueError, 'tune must be "auto" or False'),
        ({"margins": {"ratio": 2.0}}, ValueError, r"unknown margin\(s\) ratio"),
        ({"margins": {"fidelity_ratio": 0.5}}, ValueError, "fidelity_ratio must be a finite"),
        ({"options": {"nuts": {}}}, ValueError, r"options given for \['nuts'\]"),
        ({"timeout_s": 0}, ValueError, "timeout_s must be a positive number"),
        ({"options": {"map": {"num_step": 5}}}, ValueError, "num_step"),
        ({"name": "sine"}, ValueError, "name 'sine' is a catalogue data set's name: call the "),
        ({"name": "my data"}, ValueError, "name must be letters, digits, '_', '.' or '-'"),
        ({"test": (np.zeros((5, 3)), np.zeros(5))}, ValueError, "x_test has 3 features"),
        ({"test": (np.zeros((5, 2)), np.full(5, np.nan))}, ValueError, "5 non-finite"),
        ({"test": np.zeros((5, 2))}, TypeError, r"test must be a pair \(x_test, y_test\)"),
        (
            {"test": (np.zeros((5, 2)), np.zeros(5)), "test_fraction": 0.2},
            ValueError,
            "with test=",
        ),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(
    tmp_path: Path, changes: dict, error: type, match: str
) -> None:
    model = changes.pop("model", _model())
    out = tmp_path / "results"
    with pytest.raises(error, match=match):
        compare(model, results_dir=out, **{"methods": ["map"], **changes})
    assert not out.exists()


def test_an_image_network_is_compared_on_its_images(tmp_path: Path) -> None:
    digits = load_digits()
    x, y = (digits.images[:120] / 16.0)[..., None], digits.target[:120]
    net = [layers.Conv2d(3, 3, activation="relu"), layers.MaxPool2d(2), layers.Flatten(),
           layers.Dense(10)]  # fmt: skip
    model = BNN(x, y, layers=net, likelihood="categorical", num_classes=10)
    plan = plan_comparison(model, methods=["map"], results_dir=tmp_path / "r", name="images")
    assert plan.data_file.image_shape == (8, 8, 1)
    assert plan.table["datasets"][0]["image"] is True
    comparison = compare(model, methods=["map"], seeds=1, reference=False, jobs=1,
                         options={"map": {"num_steps": 30}}, results_dir=tmp_path / "r",
                         name="images")  # fmt: skip
    assert (comparison.table["status"] == "ok").all()
    fit = comparison.results["images-split0-map-numpyro-seed0"]
    assert fit.spec == model.spec  # the user's network, on (8, 8, 1) images


@pytest.mark.parametrize(
    "kwargs",
    [
        {"hidden": (5, 3), "activation": "relu", "noise": 0.3},
        {"hidden": (4,), "noise": "learned", "noise_prior": priors.PBP_NOISE_PRIOR},
        {
            "layers": [layers.Dense(3, "tanh"), layers.Dense(1)],
            "noise": "learned",
            "prior": [priors.Normal(0.5), priors.ScaleMixture(0.5, 1.0, 0.1)],
        },
        {"hidden": (4,), "likelihood": "categorical", "num_classes": 3},
    ],
)
def test_the_suite_rebuilds_the_users_network(kwargs: dict) -> None:
    x, y = _data(12)
    if kwargs.get("likelihood") == "categorical":
        y = np.arange(12) % 3
    model = BNN(x, y, **kwargs)
    task = "classification" if kwargs.get("likelihood") else "regression"
    data = Dataset(
        name="d", task=task, split=0, x_train=x, y_train=y, x_test=x, y_test=y,
        num_classes=3 if task == "classification" else None, y_mean=0.0, y_std=1.0,
        x_mean=np.zeros(2), x_std=np.ones(2),
    )  # fmt: skip
    rebuilt = BNN(x, y, **model_arguments(model_table(model.spec), data))
    assert rebuilt.spec == model.spec


def test_a_hierarchical_prior_leaves_out_the_methods_built_on_a_mode() -> None:
    model = BNN(*_data(), hidden=(4,), noise="learned", prior=priors.Horseshoe())
    plan = plan_comparison(model)
    assert plan.table["methods"] and not {"map", "laplace", "ensemble"} & set(plan.table["methods"])
    with pytest.raises(ValueError, match=r"methods \['map'\] are built on a mode .* drop them"):
        plan_comparison(model, methods=["map", "svi"])


def test_the_plan_tunes_what_needs_it_and_samples_a_reference_where_nuts_can() -> None:
    plan = plan_comparison(_model(), methods=["map", "mcdropout"])
    (dataset,) = plan.table["datasets"]
    assert plan.table["methods"]["mcdropout"]["tune"]["grid"]["dropout_rate"][0] == 1e-4
    assert dataset["exclude"] == ["mcdropout.untuned"]
    assert plan.table["reference"] == {} and "no_reference" not in dataset
    assert plan.data_file.test_fraction == 0.1 and plan.data_file.splits == 1
    assert plan.table["seeds"] == [0, 1, 2]
    # Named by its label: the report's title, and the default folder with the content's key.
    assert plan.table["name"] == "data" and plan.results_dir.name.startswith("compare-data-")
    named = plan_comparison(_model(), methods=["map"], name="friedman")
    assert named.table["name"] == "friedman"
    assert named.results_dir.name.startswith("compare-friedman-")
    # A rate given is used as given; tune=False runs the default.
    given = plan_comparison(_model(), methods=["mcdropout"],
                            options={"mcdropout": {"dropout_rate": 0.1}})  # fmt: skip
    assert "tune" not in given.table["methods"]["mcdropout"]
    assert "tune" not in plan_comparison(_model(), tune=False).table["methods"]["mcdropout"]
    # Too many weights for NUTS: no reference, and the Summary will say why.
    wide = plan_comparison(_model(hidden=(AUTO_REFERENCE_WEIGHTS,)), methods=["map"])
    assert "pass reference=True" in wide.table["datasets"][0]["no_reference"]
    forced = plan_comparison(_model(hidden=(AUTO_REFERENCE_WEIGHTS,)), reference=True)
    assert forced.table["reference"] == {}
    settings = plan_comparison(_model(), reference={"num_chains": 2, "num_warmup": 300})
    assert settings.table["reference"] == {"num_chains": 2, "num_warmup": 300}
    assert "reference" not in plan_comparison(_model(), reference=False).table
    margins = {"fidelity_ratio": 1.5, "test_ll_nats": 0.1}
    assert plan_comparison(_model(), margins=margins).table["margins"] == margins
    assert plan_comparison(_model()).table["margins"] == {
        "fidelity_ratio": 1.25,
        "test_ll_nats": 0.05,
    }
    assert plan_comparison(_model(), seeds="auto").table["seeds"] == "auto"  # the suite's own


def test_tables_must_hold_the_models_data(tmp_path: Path) -> None:
    csv = tmp_path / "small.csv"
    pd.DataFrame({"a": range(8), "b": range(8), "y": np.linspace(0, 1, 8)}).to_csv(csv, index=False)
    table, _ = read_tables(str(csv), target="y")
    with pytest.raises(ValueError, match=r"tables must be the data file\(s\) the model's data"):
        compare(_model(), tables=(table, None), results_dir=tmp_path / "r", methods=["map"])
    assert not (tmp_path / "r").exists()


def _stored(plan, path: Path) -> dict[str, np.ndarray]:
    """The arrays of a plan's file as its cells will read them."""
    with np.load(io.BytesIO(plan.files[path])) as archive:
        return {name: archive[name] for name in archive.files}


def test_a_given_test_set_is_its_own_file_and_the_one_split(tmp_path: Path) -> None:
    x, y = _data(20, seed=1)
    plan = plan_comparison(_model(), test=(x, y), results_dir=tmp_path / "r", name="mine")
    train, test = plan.files
    assert plan.data_file.path == str(train) and plan.data_file.test_path == str(test)
    assert plan.data_file.test_fraction is None and plan.data_file.splits == 1
    np.testing.assert_array_equal(_stored(plan, test)["y"], y.astype(np.float32))
    assert train.name.startswith("mine-") and test.name.endswith("-test.npz")
    # Another test set is another comparison: another folder's key.
    other = plan_comparison(_model(), test=(x, y + 1.0), name="mine")
    assert other.results_dir != plan_comparison(_model(), test=(x, y), name="mine").results_dir
    # Labels such as the model's data had are mapped by its classes.
    kinds = np.array(["red", "blue", "green", "blue"] * 15)
    labelled = BNN(_data()[0], kinds, hidden=(4,))
    held = plan_comparison(labelled, test=(x[:3], ["green", "red", "red"]), name="kinds")
    _, test_file = held.files
    assert _stored(held, test_file)["y"].tolist() == [1, 2, 2]
    with pytest.raises(ValueError, match="y_test holds labels the model's classes do not: 'teal'"):
        plan_comparison(labelled, test=(x[:2], ["teal", "red"]), name="kinds")


def test_python_and_command_line_give_the_same_comparison(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On the README's example data: scikit-learn's diabetes table, written as the README's
    command writes it."""
    csv = tmp_path / "diabetes.csv"
    load_diabetes(as_frame=True).frame.to_csv(csv, index=False)

    table = pd.read_csv(csv)
    x, y = table.drop(columns="target").to_numpy(), table["target"].to_numpy()
    model = BNN(x, y, hidden=(4,), noise="learned")
    ours = compare(model, methods=["map", "svi"], seeds=[0, 1], reference=False, options=FAST,
                   results_dir=tmp_path / "python", test_fraction=0.2, jobs=1,
                   name="diabetes-file")  # fmt: skip
    assert isinstance(ours, Comparison)
    frame = ours.table
    assert list(frame[["method", "seed"]].itertuples(index=False, name=None)) == [
        ("svi", 0), ("svi", 1), ("map", 0), ("map", 1),
    ]  # fmt: skip
    assert (frame["status"] == "ok").all()
    assert frame["test_ll"].notna().all() and (frame["fit_s"] > 0).all()
    assert "ref_w2" not in frame  # no reference: no fidelity columns
    text = str(ours.summary)
    assert "No reference posterior: ranked on held-out test log-likelihood and cost" in text
    assert ours.summary.closest is None
    fit = ours.results["diabetes-file-split0-map-numpyro-seed1"]
    assert isinstance(fit, FitResult) and fit.method == "map" and fit.seed == 1
    assert set(ours.results) == set(frame["cell_id"])
    report = ours.report(tmp_path / "report")
    assert report.name == "index.html" and "Summary" in report.read_text()
    assert "Benchmark report: diabetes-file" in report.read_text()
    assert "<strong>diabetes-file: Trust" in ours._repr_html_()
    # The report's figures, one at a time, shown inline in a notebook.
    front = ours.figure()
    assert front.png.startswith(b"\x89PNG") and front._repr_png_() == front.png
    assert '<img src="data:image/png;base64,' in front._repr_html_()
    assert "Cost against quality" in front._repr_html_()
    with pytest.raises(ValueError, match=r"unknown figure 'front'; figures: fits_1d, calibr"):
        ours.figure("front")
    with pytest.raises(ValueError, match="nothing to draw in figure 'fits_1d' here"):
        ours.figure("fits_1d")  # ten input columns
    # The recommended fit predicts from the file's own rows, in the target's units: its test
    # RMSE is the table's.
    split = json.loads((tmp_path / "python" / "data" / "diabetes-file.json").read_text())
    rows = np.asarray(split["splits"][0]["test_rows"])
    best = ours.recommended
    trusted = ours.summary.recommendation.cheapest_as_good or ours.summary.recommendation.trusted
    assert (best.method, best.backend, best.seed) == (*trusted.group, 0)
    rmse = float(np.sqrt(np.mean((best.predict(x[rows]).mean - y[rows]) ** 2)))
    mine = frame[(frame["method"] == best.method) & (frame["seed"] == 0)]["rmse"].item()
    assert rmse == pytest.approx(mine, rel=1e-4)
    assert ours.fit_for("svi", "numpyro", seed=1).seed == 1
    with pytest.raises(ValueError, match=r"no fit of nuts/numpyro .*: map/numpyro, svi/numpyro"):
        ours.fit_for("nuts", "numpyro")
    with pytest.raises(ValueError, match=r"no fit of map/numpyro at seed 7; seeds: 0, 1"):
        ours.fit_for("map", "numpyro", seed=7)

    # The command line: the same file, the same settings, another folder; and new rows (the
    # held-out ones, columns shuffled, without the target) predicted by the recommended fit.
    new_rows = table.drop(columns="target").iloc[rows].iloc[:, ::-1]
    new_rows.to_csv(tmp_path / "new.csv", index=False)
    command = [
        "compare", str(csv), "--target", "target", "--hidden", "4", "--methods", "map,svi",
        "--seeds", "2", "--reference", "no", "--test-fraction", "0.2", "--jobs", "1",
        "--option", "map.num_steps=60", "--option", "svi.num_steps=60",
        "--option", "svi.num_draws=20", "--out", str(tmp_path / "cli"),
    ]  # fmt: skip
    assert main([*command, "--predict", str(tmp_path / "new.csv")]) == 0
    theirs = Comparison(tmp_path / "cli")
    written = pd.read_csv(tmp_path / "cli" / "predictions-new.csv")
    pd.testing.assert_frame_equal(written[new_rows.columns], new_rows.reset_index(drop=True))
    predicted = theirs.recommended.predict(x[rows])
    np.testing.assert_allclose(written["target_mean"], predicted.mean, rtol=1e-6)
    np.testing.assert_allclose(written["target_std"], predicted.std, rtol=1e-6)
    lower, upper = written["target_lower_95"], written["target_upper_95"]
    assert ((lower < written["target_mean"]) & (written["target_mean"] < upper)).all()
    covered = ((lower <= y[rows]) & (y[rows] <= upper)).mean()
    recorded = pd.read_csv(tmp_path / "cli" / "results.csv")
    recorded = recorded[(recorded["method"] == best.method) & (recorded["seed"] == 0)]
    assert covered == pytest.approx(recorded["coverage_95"].item())
    assert theirs.dataset == "diabetes-file"  # diabetes names a catalogue set
    numbers = ["test_ll", "rmse", "crps", "coverage_90"]
    pd.testing.assert_frame_equal(theirs.table[numbers], frame[numbers])
    assert (tmp_path / "cli" / "index.html").is_file()
    assert (tmp_path / "cli" / "data" / "diabetes-file.json").is_file()
    index = tmp_path / "cli" / "index.html"  # rendered from what the folder holds: kept
    stamp = index.stat().st_mtime_ns
    assert theirs.report() == index and index.stat().st_mtime_ns == stamp
    with caplog.at_level(logging.INFO):  # the command again: the report is kept, and it says so
        assert main(command) == 0
    assert "is current" in caplog.text and "written to" not in caplog.text
    assert index.stat().st_mtime_ns == stamp
    # The file's column names are kept through the comparison's own data file.
    kept = json.loads((tmp_path / "cli" / "data" / "diabetes-file.json").read_text())
    assert kept["splits"][0]["features"] == list(table.drop(columns="target").columns)

    # Run again: everything is stored, nothing is fitted.
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "python").glob("cells/*/record.json")}
    again = compare(model, methods=["map", "svi"], seeds=[0, 1], reference=False, options=FAST,
                    results_dir=tmp_path / "python", test_fraction=0.2, jobs=1,
                    name="diabetes-file")  # fmt: skip
    assert {p: p.stat().st_mtime_ns for p in before} == before
    pd.testing.assert_frame_equal(again.table, frame)

    # A fit saved without its units (as before fits carried them) never predicts as if it had.
    cell = "diabetes-file-split0-map-numpyro-seed1"
    meta_path = tmp_path / "python" / "cells" / cell / META_FILE
    meta = json.loads(meta_path.read_text())
    meta.pop("units")
    meta_path.write_text(json.dumps(meta))
    older = Comparison(tmp_path / "python")
    with pytest.warns(UnitsUnknownWarning, match="returns a standardised predictive"):
        assert older.results[cell].units is None
    with pytest.raises(ValueError, match=f"the fit of cell {cell} was saved without its data"):
        older.fit_for("map", "numpyro", seed=1)


def test_the_command_line_names_bad_data_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    csv = tmp_path / "bad.csv"
    csv.write_text("a,b,y\n1,2,3.5\n1,oops,4.5\n2,3,5.5\n")
    with caplog.at_level(logging.ERROR):
        status = main(["compare", str(csv), "--target", "y", "--out", str(tmp_path / "out")])
    assert status == 2
    assert "bad.csv: column 'b', row 2: not a number: 'oops'" in caplog.text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ("a,y\n1,2\n", "new.csv: no feature column 'b'; the columns are 'a', 'y'"),
        ("a,b\n1,\n", "new.csv: column 'b', row 1: missing value"),
        ("a,b,y_mean\n1,2,3\n", r"new.csv: its columns \['y_mean'\] would be overwritten"),
    ],
)
def test_rows_to_predict_are_checked_before_anything_is_fitted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, rows: str, match: str
) -> None:
    csv = tmp_path / "train.csv"
    csv.write_text("a,b,y\n1,2,3.5\n1,3,4.5\n2,3,5.5\n2,5,1.0\n")
    (tmp_path / "new.csv").write_text(rows)
    args = ["compare", str(csv), "--target", "y", "--out", str(tmp_path / "out"),
            "--predict", str(tmp_path / "new.csv")]  # fmt: skip
    with caplog.at_level(logging.ERROR):
        assert main(args) == 2
    assert re.search(match, caplog.text)
    assert not (tmp_path / "out").exists()


class _Recorded:
    """What ``ppl-bnn compare`` passed to ``compare``, and a stand-in for its result."""

    def __init__(self) -> None:
        self.calls: list[tuple[BNN, dict]] = []

    def __call__(self, model: BNN, **kwargs: object) -> _Recorded:
        self.calls.append((model, kwargs))
        return self

    def report(self) -> Path:
        return Path("index.html")

    summary = "verdict"
    table = pd.DataFrame({"status": ["ok"]})


def test_the_command_line_reads_a_test_file_with_the_training_files_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    recorded = _Recorded()
    monkeypatch.setattr("ppl_bnn.commands.compare", recorded)
    train, test = tmp_path / "sine.csv", tmp_path / "held.tsv"
    train.write_text(
        "a,b,kind\n0.1,1,red\n0.2,2,blue\n0.3,3,green\n0.4,4,red\n0.5,5,blue\n0.6,6,green\n"
    )
    test.write_text("a\tb\tkind\n0.5\t5\tgreen\n0.6\t6\tred\n")
    args = [
        "compare", str(train), "--target", "kind", "--test", str(test), "--hidden", "8,8",
        "--methods", "svi,map", "--backends", "pyro,numpyro", "--option", "svi.num_steps=9",
    ]  # fmt: skip
    assert main(args) == 0
    ((model, kwargs),) = recorded.calls
    # Classes in sorted order of the training file's labels, the test file mapped by them.
    assert model.spec.likelihood == "categorical" and model.spec.num_classes == 3
    assert model.y.tolist() == [2, 0, 1, 2, 0, 1]
    assert kwargs["test"][1].tolist() == [1, 2]
    assert model.spec.hidden == (8, 8)
    assert kwargs["methods"] == ["svi", "map"] and kwargs["backends"] == ["pyro", "numpyro"]
    assert kwargs["options"] == {"svi": {"num_steps": 9}}
    assert kwargs["name"] == "sine-file"  # the file's name, unless it names a catalogue set
    # A label the training file has not: named with its file and row, nothing run.
    test.write_text("a\tb\tkind\n0.5\t5\tgreen\n0.6\t6\tpurple\n")
    with caplog.at_level(logging.ERROR):
        assert main(args) == 2
    assert "held.tsv" in caplog.text and "row 2" in caplog.text and "'purple'" in caplog.text
    assert len(recorded.calls) == 1


@pytest.mark.parametrize(
    ("passed", "closest", "line"),
    [
        (True, "nuts/numpyro", "Reference posterior: a chain ensemble of 16 MCLMC chains from "
         "deep-ensemble starts (all 16 kept), floor W2 0.041 (0.0098 standardised), sampled in "
         "1 s."),
        (False, None, "Not ranked: reference has no floor (3 of 16 chains kept, fewer than the 4 "
         "a floor needs); ranked on held-out test log-likelihood instead."),
    ],
)  # fmt: skip
def test_the_verdict_names_the_closest_only_against_a_reference_with_a_floor(
    tmp_path: Path, passed: bool, closest: str | None, line: str
) -> None:
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    found = {"chains_run": 16, "chains_kept": 16 if passed else 3}
    if passed:
        found.update(floor_w2=0.041, floor_w2_std=0.0098)
    entry = ReferenceEntry(
        dataset="d", split=0, status="ok", passed=passed,
        note=None if passed else "no floor: 3 of 16 chains kept, fewer than the 4 a floor needs",
        gate={"min_chains": 4}, diagnostics=found,
        settings={"engine": "mclmc", "num_chains": 16, "num_warmup": 2000}, wall_s=1.0,
        folder=tmp_path,
    )  # fmt: skip
    basis = Basis("ref_w2", "W2 to ref.", True, "fidelity") if passed else None
    top = Standing(("nuts", "numpyro"), Grade.TRUST, value=0.1, se=0.01, cost=2.0)
    map_avoid = Standing(("map", "numpyro"), Grade.AVOID, reason="diverged", detail="1 of 3 cells")
    verdict = Verdict("d", Recommendation("d", basis, (top, map_avoid)), (entry,), passed, ())
    assert verdict.closest == closest
    text = str(verdict)
    assert line in text
    assert "Unusable or to avoid: map/numpyro (diverged in 1 of 3 cells)." in text
    if not passed:
        assert (
            "Try more chains (num_chains, now 16) or a longer warm-up (num_warmup, now 2000)."
            in text
        )
