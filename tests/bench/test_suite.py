"""Suite files: parsing, expansion into cells, config hashes, and every bad-input path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ppl_bnn import BNN, priors
from ppl_bnn.bench.cell import Cell, model_arguments
from ppl_bnn.bench.suite import SUITES_DIR, SuiteError, load_suite, parse_suite
from ppl_bnn.data import load_dataset
from ppl_bnn.report.equivalence import Margins

RAW = {
    "name": "tiny",
    "seeds": [0, 1],
    "backends": ["numpyro", "pyro"],
    "timeout_s": 60,
    "reference": {"num_chains": 8, "chains_per_batch": 4, "num_samples": 30, "timeout_s": 90},
    "model": {"hidden": [5], "activation": "tanh"},
    "datasets": [
        {"name": "sine", "splits": [0, 3], "max_train": 20},
        {
            "name": "digits",
            "model": {"hidden": [8]},
            "exclude": ["nuts.pyro"],
            "options": {"svi": {"num_steps": 7}, "nuts.numpyro": {"num_samples": 9}},
            "no_reference": "too many weights",
        },
    ],
    "methods": {
        "svi": {"num_steps": 100},
        "nuts": {"num_samples": 50, "pyro": {"num_samples": 20, "budget_note": "smaller"}},
    },
}


#: Dataset timeouts refused as the suite's are, and how the error shows them.
BAD_TIMEOUTS = [
    (0, "0"), (-5, "-5"), (float("nan"), "nan"), (float("inf"), "inf"), (True, "True"),
    ("600", "'600'"), (None, "None"),
]  # fmt: skip
SINE_ONLY = {"datasets": [{"name": "sine"}], "reference": None}


def _suite(**changes: object) -> dict:
    raw = copy.deepcopy(RAW)
    raw.update(changes)
    return raw


def test_expansion_merges_options_in_order() -> None:
    cells = parse_suite(RAW).cells()
    # sine: 2 splits x 2 methods x 2 backends x 2 seeds; digits: 1 split x 3 (method, backend) x 2
    assert len(cells) == 16 + 6
    by_id = {c.cell_id: c for c in cells}
    assert by_id["sine-split3-nuts-pyro-seed1"].options == {"num_samples": 20}
    assert by_id["sine-split3-nuts-pyro-seed1"].budget_note == "smaller"
    assert by_id["sine-split0-nuts-numpyro-seed0"].budget_note is None
    assert by_id["digits-split0-svi-pyro-seed0"].options == {"num_steps": 7}
    assert by_id["digits-split0-nuts-numpyro-seed0"].options == {"num_samples": 9}
    assert "digits-split0-nuts-pyro-seed0" not in by_id
    assert by_id["digits-split0-svi-numpyro-seed0"].model == {"hidden": [8], "activation": "tanh"}
    assert len(by_id) == len(cells)


def test_references_expand_per_dataset_and_split() -> None:
    suite = parse_suite(RAW)
    jobs = suite.references()
    assert [(j.name, j.no_reference) for j in jobs] == [
        ("sine-split0", None),
        ("sine-split3", None),
        ("digits-split0", "too many weights"),
    ]
    cell = jobs[1].cell
    assert (cell.method, cell.backend, cell.seed, cell.split) == ("mclmc", "numpyro", 0, 3)
    # One batch's fit: 4 chains from deep-ensemble starts; the settings are the cell's own.
    assert cell.options == {
        "num_chains": 4, "num_warmup": 2000, "num_samples": 30, "thinning": 20, "init": "ensemble",
    }  # fmt: skip
    assert cell.reference is not None and cell.reference["num_chains"] == 8
    assert "timeout_s" not in cell.reference and "reference" in cell.config()
    assert cell.model == {"hidden": [5], "activation": "tanh"} and cell.data == {"max_train": 20}
    assert cell.stored_draws == 1000 and cell.timeout_s == 90
    assert jobs[2].cell.model == {"hidden": [8], "activation": "tanh"}
    # Only the dataset filter applies: a reference serves every method and backend.
    only = {"dataset": {"sine"}, "method": {"svi"}, "backend": {"pyro"}}
    assert [j.name for j in suite.references(max_splits=1, only=only)] == ["sine-split0"]
    assert parse_suite(_suite(reference=None)).references() == []
    defaults = parse_suite(_suite(reference={})).reference
    assert defaults is not None and defaults.as_dict() == {
        "engine": "mclmc", "num_chains": 512, "chains_per_batch": 16, "target_floor": 0.01,
        "max_seconds": 600.0, "num_warmup": 2000, "num_samples": 100, "thinning": 20,
        "max_tree_depth": None, "target_accept": None, "seed": 0, "timeout_s": 1800.0,
        "stored_draws": 1000,
    }  # fmt: skip
    nuts = parse_suite(_suite(reference={"engine": "nuts", "num_chains": 4})).references()[0]
    assert nuts.cell.method == "nuts" and nuts.cell.options == {
        "num_warmup": 500, "num_samples": 500, "max_tree_depth": 8, "target_accept": 0.8,
        "num_chains": 4, "init": "ensemble", "chain_method": "vectorized",
    }  # fmt: skip


def test_filters_and_split_limit() -> None:
    suite = parse_suite(RAW)
    cells = suite.cells(max_splits=1, only={"method": {"svi"}, "backend": {"pyro"}})
    assert {c.cell_id for c in cells} == {
        "sine-split0-svi-pyro-seed0",
        "sine-split0-svi-pyro-seed1",
        "digits-split0-svi-pyro-seed0",
        "digits-split0-svi-pyro-seed1",
    }
    with pytest.raises(SuiteError, match="max_splits must be >= 1"):
        suite.cells(max_splits=0)


@pytest.mark.parametrize(
    ("only", "message"),
    [
        ({"method": {"mapp"}}, r"--methods: unknown method 'mapp'; suite 'tiny' has nuts, svi$"),
        ({"backend": {"PYRO"}}, r"--backends: unknown backend 'PYRO'; .* numpyro, pyro$"),
        ({"dataset": {"sine", "nosuch"}}, r"--datasets: unknown dataset 'nosuch'; .* digits, sine"),
    ],
)
def test_a_filter_naming_nothing_of_the_suite_is_refused(only: dict, message: str) -> None:
    suite = parse_suite(RAW)
    with pytest.raises(SuiteError, match=message):
        suite.cells(only=only)
    if "dataset" in only:
        with pytest.raises(SuiteError, match=message):
            suite.references(only=only)


def test_a_filter_of_known_values_may_select_a_tuned_contestant_or_no_cell() -> None:
    tuned = {"map": {"num_steps": 15, "tune": {"grid": {"num_steps": [10, 20]}}}}
    suite = parse_suite(_suite(methods={**RAW["methods"], **tuned}))
    assert {c.contestant for c in suite.cells(only={"method": {"map (tuned)"}})} == {"map (tuned)"}
    # digits excludes nuts on pyro: each value is the suite's, but no cell has all three.
    suite = parse_suite(RAW)
    assert suite.cells(only={"dataset": {"digits"}, "method": {"nuts"}, "backend": {"pyro"}}) == []


def test_config_hash_tracks_what_determines_the_result() -> None:
    cell = Cell(suite="s", dataset="sine", split=0, method="svi", backend="numpyro", seed=0)
    same = Cell(
        suite="other", dataset="sine", split=0, method="svi", backend="numpyro", seed=0,
        timeout_s=5, budget_note="note",
    )  # fmt: skip
    assert cell.config_hash() == same.config_hash()
    for change in (
        {"seed": 1},
        {"split": 1},
        {"options": {"num_steps": 10}},
        {"model": {"hidden": [3]}},
        {"data": {"max_train": 10}},
        {"stored_draws": 1000},
        {"xla_optimisation": "low"},
        {"xla_optimisation": "full"},
    ):
        other = Cell(**{**cell.to_dict(), **change})
        assert other.config_hash() != cell.config_hash(), change
    assert Cell.from_dict(cell.to_dict()) == cell
    # Unset, it is not in the config, so the hashes of results stored before it existed hold.
    assert "xla_optimisation" not in cell.config()


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"colour": "red"}, r"unknown keys \['colour'\]"),
        ({"backends": ["stan"]}, "unknown backend 'stan'"),
        ({"seeds": [-1]}, "seeds must be"),
        ({"seeds": []}, "seeds must be"),
        ({"timeout_s": 0}, "timeout_s must be a finite positive number"),
        ({"model": {"width": 3}}, r"\[model\]: unknown keys \['width'\]"),
        ({**SINE_ONLY, "methods": {"vi": {}}}, "unknown method 'vi'"),
        ({**SINE_ONLY, "methods": {"svi": {"num_stepz": 3}}}, "svi on numpyro: .*num_stepz"),
        ({**SINE_ONLY, "methods": {"svi": {"num_steps": -3}}}, "num_steps must be"),
        (
            {**SINE_ONLY, "methods": {"svi": {"jax": {"num_steps": 3}}}},
            "sub-table 'jax' is not a backend",
        ),
        ({"datasets": [{"name": "cifar"}]}, "unknown dataset 'cifar'"),
        ({"datasets": [{"splits": [0]}]}, "missing 'name'"),
        ({"datasets": [{"name": "sine", "splits": "some"}]}, "splits must be"),
        ({"datasets": [{"name": "sine", "exclude": ["hmc"]}]}, "'hmc' names no method"),
        ({"datasets": [{"name": "sine", "max": 3}]}, r"unknown keys \['max'\]"),
        ({"reference": "nuts.numpyro"}, r"\[reference\]: must be a table of reference settings"),
        ({"reference": {"chains": 4}}, r"\[reference\]: unknown keys \['chains'\]"),
        ({"reference": {"num_chains": 3}}, r"\[reference\]: num_chains must be an integer >= 4"),
        ({"reference": {"num_warmup": -1}}, "num_warmup must be an integer >= 0, got -1"),
        ({"reference": {"num_samples": 3}}, "num_samples must be an integer >= 8, got 3"),
        ({"reference": {"max_tree_depth": "deep"}}, "max_tree_depth must be an integer"),
        ({"reference": {"num_chains": True}}, "num_chains must be an integer >= 4, got True"),
        (
            {"reference": {"engine": "nuts", "target_accept": 1.5}},
            r"target_accept must be a number in \(0, 1\)",
        ),
        ({"reference": {"engine": "hmc"}}, r"unknown engine 'hmc'; available: mclmc, mams, nuts"),
        ({"reference": {"max_tree_depth": 5}}, "max_tree_depth is not read by the mclmc engine"),
        ({"reference": {"chains_per_batch": 513}}, "chains_per_batch must be from 1 to num_chains"),
        ({"reference": {"target_floor": 0}}, "target_floor must be a finite number > 0, got 0"),
        ({"reference": {"max_seconds": "long"}}, "max_seconds must be a finite number > 0"),
        ({"reference": {"seed": -2}}, "seed must be an integer >= 0, got -2"),
        ({"reference": {"timeout_s": 0}}, r"\[reference\]: timeout_s must be a finite positive"),
        ({"datasets": [{"name": "sine", "no_reference": 3}]}, "no_reference must be a non-empty"),
        ({"datasets": [{"name": "sine", "no_reference": " "}]}, "no_reference must be a non-empty"),
        # Everything below used to pass the parser and fail in every worker, or worse.
        ({"name": "../../x"}, r"name must be a plain file name .*, got '\.\./\.\./x'"),
        ({"name": "/tmp/x"}, "name must be a plain file name"),
        ({"name": ""}, "name must be a plain file name .*, got ''$"),
        ({"name": ".."}, "name must be a plain file name"),
        ({"name": ".jax-cache"}, "name must be a plain file name"),
        ({"name": "a\nb"}, "name must be a plain file name"),
        ({"name": 3}, "name must be a plain file name .*, got 3$"),
        ({"timeout_s": float("nan")}, "timeout_s must be a finite positive number, got nan"),
        ({"timeout_s": float("inf")}, "timeout_s must be a finite positive number, got inf"),
        ({"timeout_s": True}, "timeout_s must be a finite positive number, got True"),
        ({"reference": {"timeout_s": float("nan")}}, r"\[reference\]: timeout_s must be a finite"),
        ({"reference": {"timeout_s": float("inf")}}, r"\[reference\]: timeout_s must be a finite"),
        ({"reference": {"timeout_s": True}}, r"\[reference\]: timeout_s must be a finite"),
        *(
            ({"datasets": [{"name": "sine", "timeout_s": bad}]}, rf"#1: timeout_s .*, got {got}$")
            for bad, got in BAD_TIMEOUTS
        ),
        ({"model": {"activation": "swish"}}, r"\[model\]: .*activation.*'swish'"),
        ({"model": {"hidden": [-5]}}, r"\[model\]: .*hidden"),
        ({"model": {"noise": -1}}, r"\[model\]: .*noise.*-1"),
        ({"model": {"prior_scale": "1"}}, r"\[model\]: .*prior_scale"),
        ({"model": {"noise_prior": {"kind": "gamma", "rate": 1.0}}}, r"\[model\]: .*noise_prior"),
        ({"model": {"noise_prior": "gamma"}}, r"\[model\]: .*noise_prior"),
        (
            {"datasets": [{"name": "sine", "model": {"activation": "swish"}}]},
            r"\[\[datasets\]\] #1 model: .*'swish'",
        ),
        (
            {"datasets": [{"name": "sine", "splits": [25]}]},
            r"splits \[25\] out of range.*20 splits",
        ),
        ({"datasets": [{"name": "sine", "max_train": -3}]}, "max_train must be an integer >= 1"),
        ({"datasets": [{"name": "sine", "max_test": 2.5}]}, "max_test must be an integer >= 1"),
        ({"seeds": [0, 0]}, r"seeds must not repeat: \[0\]"),
        ({"backends": ["numpyro", "numpyro"]}, r"backends must not repeat: \['numpyro'\]"),
        ({"backends": "numpyro"}, "backends must be a list"),
        ({"datasets": [{"name": "sine", "splits": [1, 1]}]}, r"splits must not repeat: \[1\]"),
        ({"datasets": [{"name": "sine"}, {"name": "sine"}]}, "dataset 'sine' is listed twice"),
        ({"datasets": [{"name": "sine", "exclude": "svi"}]}, "exclude must be a list, got 'svi'"),
        ({"datasets": [{"name": "sine", "exclude": ["svi.stan"]}]}, "'svi.stan' names no backend"),
        (
            {"datasets": [{"name": "sine", "options": {"svi.stan": {"num_steps": 3}}}]},
            "'svi.stan' names no backend",
        ),
        (
            {"datasets": [{"name": "sine", "options": {"svi": {"num_stepz": 3}}}]},
            "sine svi on numpyro: .*num_stepz",
        ),
        (
            {**SINE_ONLY, "backends": ["numpyro"], "methods": {"svi": {"pyro": {"num_stepz": 3}}}},
            "svi on pyro: .*num_stepz",
        ),
        (
            {**SINE_ONLY, "methods": {"nuts": {"potential": "traced"}}},
            "nuts on numpyro: option 'potential' .* applies to the pyro backend only",
        ),
        ({"margins": {"fidelity_ratio": 1.0}}, r"\[margins\]: .*fidelity_ratio must be a finite"),
        ({"margins": {"test_ll_nats": "0.1"}}, r"\[margins\]: test_ll_nats must be a number"),
        ({"margins": {"nats": 0.1}}, r"\[margins\]: unknown margin\(s\) nats"),
        ({"margins": 1.25}, r"\[margins\]: must be a table"),
        ({"xla_optimisation": "fast"}, "xla_optimisation must be one of 'full', 'low', got 'fast'"),
        ({"xla_optimisation": 1}, "xla_optimisation must be one of 'full', 'low', got 1$"),
    ],
)
def test_bad_suites(changes: dict, match: str) -> None:
    with pytest.raises(SuiteError, match=match):
        parse_suite(_suite(**changes))


LEARNED_MIXTURE = {
    "kind": "scale_mixture", "pi": 0.2, "sigma1": 1.0, "sigma2": 0.1, "learned": True,
}  # fmt: skip


def test_a_learned_prior_with_a_method_that_cannot_fit_it_is_refused_when_read() -> None:
    datasets = [{"name": "sine", "model": {"prior": LEARNED_MIXTURE}}]
    with pytest.raises(
        SuiteError,
        match=r"sine nuts on numpyro: the prior is learned \(learned = true\), which nuts "
        r"cannot fit .*exclude 'nuts' for this dataset",
    ):
        parse_suite(_suite(datasets=datasets))
    # Excluded where it cannot learn it, the suite is valid; a fixed mixture suits every method.
    excluded = [{**datasets[0], "exclude": ["nuts"]}]
    assert {c.method for c in parse_suite(_suite(datasets=excluded)).cells()} == {"svi"}
    fixed = [{"name": "sine", "model": {"prior": {**LEARNED_MIXTURE, "learned": False}}}]
    assert {c.method for c in parse_suite(_suite(datasets=fixed)).cells()} == {"svi", "nuts"}


def test_a_hierarchical_prior_with_a_method_built_on_a_mode_is_refused_when_read() -> None:
    horseshoe = {"kind": "horseshoe", "global_scale": 1.0, "local_scale": 1.0}
    methods = {"svi": {}, "map": {}}
    datasets = [{"name": "sine", "model": {"prior": horseshoe}}]
    with pytest.raises(
        SuiteError,
        match=r"sine map on numpyro: the prior is hierarchical .* no mode, which map is built "
        r"on; exclude 'map' for this dataset",
    ):
        parse_suite(_suite(datasets=datasets, methods=methods))
    excluded = [{**datasets[0], "exclude": ["map"]}]
    assert {c.method for c in parse_suite(_suite(datasets=excluded, methods=methods)).cells()} == {
        "svi"
    }


def test_a_dataset_timeout_overrides_the_suites_for_its_cells_only() -> None:
    datasets = [{"name": "sine", "timeout_s": 7200}, {"name": "gap"}]
    suite = parse_suite(_suite(datasets=datasets))
    by_dataset = {c.dataset: c.timeout_s for c in suite.cells()}
    assert by_dataset == {"sine": 7200.0, "gap": 60.0}
    assert suite.datasets[0].timeout_s == 7200.0 and suite.datasets[1].timeout_s is None
    # The reference keeps [reference]'s limit.
    assert {j.cell.timeout_s for j in suite.references()} == {90.0}
    # Like the suite's, a dataset's timeout leaves the config hash (and stored cells) as they are.
    plain = {
        c.cell_id: c.config_hash() for c in parse_suite(_suite(datasets=[{"name": "sine"}])).cells()
    }
    assert {c.cell_id: c.config_hash() for c in suite.cells() if c.dataset == "sine"} == plain


@pytest.mark.parametrize("name", ["Ünïcode suite", "with spaces", "<script>alert(1)"])
def test_plain_file_names_are_valid_suite_names(name: str) -> None:
    assert parse_suite(_suite(name=name)).name == name


def test_split_indices_of_a_data_directory_set_are_checked_when_it_is_known(
    tmp_path: Path,
) -> None:
    uci = tmp_path / "uci" / "bostonHousing" / "data"
    uci.mkdir(parents=True)
    (uci / "n_splits.txt").write_text("20\n")
    suite = parse_suite(_suite(datasets=[{"name": "bostonHousing", "splits": [1, 25]}]))
    with pytest.raises(SuiteError, match=r"bostonHousing splits \[25\] out of range: .*20 splits"):
        suite.cells(data_dir=tmp_path)
    # Without its files the cells are still listed: each fails saying where to get the data.
    assert len(suite.cells(data_dir=tmp_path / "empty")) == 16


def test_missing_required_key() -> None:
    raw = _suite()
    del raw["methods"]
    with pytest.raises(SuiteError, match="missing required key 'methods'"):
        parse_suite(raw)


def test_suite_files(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"unknown suite 'nope'; known: .*default"):
        load_suite("nope")
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [")
    with pytest.raises(SuiteError, match=r"bad\.toml: not valid TOML"):
        load_suite(bad)


@pytest.mark.parametrize("path", sorted(SUITES_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_suites_parse(path: Path) -> None:
    suite = load_suite(path)
    assert suite.name == path.stem
    if suite.kind == "perf":
        assert suite.probes
    else:
        assert suite.datasets and suite.methods


def test_model_arguments_follow_the_task_and_read_the_noise_prior() -> None:
    sine, digits = load_dataset("sine"), load_dataset("digits", max_train=50, max_test=10)
    model = {"hidden": [5], "noise_prior": {"kind": "gamma", "concentration": 6.0, "rate": 6.0}}
    regression = model_arguments(model, sine)
    assert regression["noise"] == "learned" and regression["likelihood"] == "gaussian"
    assert regression["noise_prior"] == priors.PBP_NOISE_PRIOR
    assert BNN(sine.x_train, sine.y_train, **regression).spec.sites()[-1].prior == priors.Gamma(
        6, 6
    )
    classification = model_arguments(model, digits)
    assert "noise_prior" not in classification and "noise" not in classification
    assert classification["num_classes"] == 10
    suite = parse_suite(_suite(model=model))
    assert suite.model["noise_prior"]["rate"] == 6.0


MIXTURE = {"kind": "scale_mixture", "pi": 0.25, "sigma1": 1.5, "sigma2": 0.05}


def test_a_suite_model_gives_the_weight_prior_as_a_table_or_one_per_layer() -> None:
    sine = load_dataset("sine")
    one = model_arguments({"hidden": [5], "prior": MIXTURE}, sine)
    assert one["prior"] == priors.ScaleMixture(0.25, 1.5, 0.05)
    model = BNN(sine.x_train, sine.y_train, **one)
    assert all(p == priors.ScaleMixture(0.25, 1.5, 0.05) for p in model.spec.priors)
    per_layer = {"hidden": [5], "prior": [MIXTURE, {"kind": "normal", "scale": 0.5}]}
    args = model_arguments(per_layer, sine)
    assert BNN(sine.x_train, sine.y_train, **args).spec.priors[1] == priors.Normal(0.5)
    assert parse_suite(_suite(model=per_layer)).model["prior"][0]["pi"] == 0.25


@pytest.mark.parametrize(
    ("prior", "extra", "match"),
    [
        ({**MIXTURE, "pi": 1.5}, {}, r"prior must be a prior table.*ScaleMixture pi must be in"),
        ({"kind": "spike"}, {}, "unknown prior kind 'spike'"),
        ({**MIXTURE, "sigma3": 1.0}, {}, "bad 'scale_mixture' prior.*sigma3"),
        ("normal", {}, "a prior is a table or a list of tables"),
        (MIXTURE, {"prior_scale": 0.5}, "give prior or prior_scale, not both"),
        ([MIXTURE] * 3, {}, "3 priors given but the network has 2 layers"),
    ],
    ids=["bad-pi", "unknown-kind", "unknown-field", "not-a-table", "with-scale", "wrong-count"],
)
def test_bad_weight_priors_in_a_suite_are_named(prior: object, extra: dict, match: str) -> None:
    with pytest.raises(SuiteError, match=match):
        parse_suite(_suite(model={"hidden": [5], "prior": prior, **extra}))


def test_default_suite_fits_seed_004s_sine_network() -> None:
    suite = load_suite(SUITES_DIR / "default.toml")
    sine = next(c for c in suite.cells() if c.dataset == "sine" and c.method == "svi")
    assert sine.model["hidden"] == [20, 20] and sine.model["activation"] == "relu"
    # The noise is known: std 1 in the original units, in the standardised units of split 0.
    assert sine.model["noise"] == pytest.approx(1 / load_dataset("sine", split=0).y_std, abs=5e-4)
    assert sine.options["learning_rate"] == 0.03


def test_default_suite_runs_the_baselines_on_every_set() -> None:
    suite = load_suite(SUITES_DIR / "default.toml")
    contestants = {(c.label, c.contestant) for c in suite.cells() if c.variant is None}
    for dataset in ("sine", "gap", "diabetes", "digits"):
        for contestant in (
            "laplace", "laplace (tuned)", "mcdropout", "mcdropout (tuned)", "map",
            "map (tuned)", "ensemble", "ensemble (tuned)", "swag (tuned)",
        ):  # fmt: skip
            assert (dataset, contestant) in contestants, (dataset, contestant)
        assert (dataset, "swag") not in contestants  # untuned SWAG has no learning rate to show
    laplace = [c for c in suite.cells() if c.method == "laplace"]
    assert all(c.options.get("hessian", "ggn") == "ggn" for c in laplace)


def test_margins_default_and_are_read_from_the_suite() -> None:
    assert parse_suite(_suite()).margins == Margins()
    suite = parse_suite(_suite(margins={"fidelity_ratio": 1.5}))
    assert suite.margins == Margins(fidelity_ratio=1.5, test_ll_nats=0.05)
