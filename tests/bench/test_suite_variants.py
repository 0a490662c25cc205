"""Suites with dataset variants, image inputs and networks given layer by layer."""

from __future__ import annotations

import copy

import pytest

from ppl_bnn import BNN, layers, priors
from ppl_bnn.bench.cell import Cell, merge_model, model_arguments
from ppl_bnn.bench.suite import SuiteError, load_suite, parse_suite
from ppl_bnn.data import load_dataset

CONV = [
    {
        "kind": "conv2d",
        "out_channels": 2,
        "kernel_size": 3,
        "padding": "same",
        "activation": "relu",
    },
    {"kind": "max_pool2d", "size": 2},
    {"kind": "flatten"},
    {"kind": "dense", "units": 10},
]
MIXTURE = {"kind": "scale_mixture", "pi": 0.2, "sigma1": 1.0, "sigma2": 0.1}
RAW = {
    "name": "images",
    "seeds": [0],
    "backends": ["numpyro", "pyro"],
    "model": {"hidden": [8], "activation": "tanh", "prior_scale": 1.0},
    "datasets": [
        {"name": "digits"},
        {
            "name": "digits",
            "variant": "conv",
            "image": True,
            "model": {"layers": CONV, "prior": MIXTURE},
            "exclude": ["map"],
            "options": {"svi": {"estimator": "flipout"}},
        },
        {"name": "digits", "variant": "wide", "model": {"hidden": [32]}},
    ],
    "methods": {"svi": {"num_steps": 10}, "map": {"num_steps": 10}},
}


def _suite(**changes: object) -> dict:
    raw = copy.deepcopy(RAW)
    raw.update(changes)
    return raw


def _with_dataset(entry: dict) -> dict:
    return _suite(datasets=[{"name": "digits"}, entry])


def test_variants_expand_into_cells_of_their_own() -> None:
    suite = parse_suite(_suite())
    cells = {c.cell_id: c for c in suite.cells()}
    assert sorted(cells) == sorted(
        [
            *(f"digits-split0-{m}-{b}-seed0" for m in ("svi", "map") for b in ("numpyro", "pyro")),
            *(f"digits-conv-split0-svi-{b}-seed0" for b in ("numpyro", "pyro")),
            *(
                f"digits-wide-split0-{m}-{b}-seed0"
                for m in ("svi", "map")
                for b in ("numpyro", "pyro")
            ),
        ]
    )
    conv = cells["digits-conv-split0-svi-numpyro-seed0"]
    assert conv.label == "digits/conv" and conv.variant == "conv"
    assert conv.data == {"image": True}
    # The layers replace the suite's MLP shorthand; the estimator is the dataset's own.
    assert conv.model == {"layers": CONV, "prior": MIXTURE}
    assert conv.options == {"num_steps": 10, "estimator": "flipout"}
    wide = cells["digits-wide-split0-svi-pyro-seed0"]
    assert wide.model == {"hidden": [32], "activation": "tanh", "prior_scale": 1.0}
    assert suite.cells(only={"dataset": {"digits/conv"}}) == [
        cells["digits-conv-split0-svi-numpyro-seed0"],
        cells["digits-conv-split0-svi-pyro-seed0"],
    ]
    assert len(suite.cells(only={"dataset": {"digits"}})) == 10


def test_without_a_variant_the_config_and_its_hash_are_unchanged() -> None:
    plain = Cell(suite="s", dataset="mnist", split=0, method="svi", backend="numpyro", seed=0)
    assert "variant" not in plain.config()
    assert plain.cell_id == "mnist-split0-svi-numpyro-seed0"
    lenet = Cell(**{**plain.to_dict(), "variant": "lenet5"})
    assert lenet.config()["variant"] == "lenet5"
    assert lenet.config_hash() != plain.config_hash()
    assert lenet.cell_id == "mnist-lenet5-split0-svi-numpyro-seed0"
    assert Cell.from_dict(lenet.to_dict()) == lenet


def test_references_of_variants_are_kept_apart() -> None:
    raw = _suite(reference={"num_chains": 4, "num_samples": 8}, methods={"svi": {}})
    raw["datasets"] = [{"name": "digits"}, {"name": "digits", "variant": "wide"}]
    names = [job.name for job in parse_suite(raw).references()]
    assert names == ["digits-split0", "digits-wide-split0"]
    only = parse_suite(raw).references(only={"dataset": {"digits/wide"}})
    assert [job.name for job in only] == ["digits-wide-split0"]


def test_a_conv_variant_builds_its_network_on_images() -> None:
    cell = next(c for c in parse_suite(_suite()).cells() if c.variant == "conv")
    data = load_dataset("digits", max_train=20, max_test=10, **cell.data)
    assert data.x_train.shape[1:] == (8, 8, 1) and data.x_ood.shape[1:] == (8, 8, 1)
    model = BNN(data.x_train, data.y_train, **model_arguments(cell.model, data))
    assert model.spec.layers[0] == layers.Conv2d(2, 3, padding="same", activation="relu")
    assert model.spec.priors[0] == priors.ScaleMixture(0.2, 1.0, 0.1)


def test_merge_model_drops_the_shorthand_only_for_layers() -> None:
    base = {"hidden": [8], "activation": "tanh", "prior_scale": 2.0, "noise": "learned"}
    assert merge_model(base, {"hidden": [3]}) == {**base, "hidden": [3]}
    assert merge_model(base, {"layers": CONV}) == {"noise": "learned", "layers": CONV}
    with_prior = {**base, "prior_scale": 1.0, "prior": MIXTURE}
    del with_prior["prior_scale"]
    assert merge_model(with_prior, {"layers": CONV})["prior"] == MIXTURE


def test_the_mnist_suite_has_lenet5_and_the_mlp() -> None:
    suite = load_suite("mnist")
    variants = {c.variant: c for c in suite.cells() if c.variant}
    assert set(variants) == {"lenet5", "mlp1024"}
    lenet, mlp = variants["lenet5"], variants["mlp1024"]
    assert lenet.options["estimator"] == "flipout" and lenet.data["image"] is True
    assert lenet.model["prior"] == {
        "kind": "scale_mixture", "pi": 0.2, "sigma1": 1.0, "sigma2": 0.1,
    }  # fmt: skip
    kinds = [t["kind"] for t in lenet.model["layers"]]
    assert kinds == [
        "conv2d", "max_pool2d", "conv2d", "max_pool2d", "conv2d", "flatten", "dense", "dense",
    ]  # fmt: skip
    assert mlp.model["hidden"] == [1024] and mlp.options["kl_weight"] == 1e-3
    # LeNet-5's 1,000 steps of about 3 s on a 2-core CPU get their own limit; the rest the suite's.
    assert (lenet.timeout_s, mlp.timeout_s, suite.timeout_s) == (5400, 1800, 1800)
    ids = {c.cell_id for c in suite.cells()}
    # The MLP 400-400 cells keep their ids; LeNet-5 and the MLP-1024 run on both backends.
    assert "mnist-split0-svi-numpyro-seed0" in ids
    assert "mnist-mlp1024-split0-svi-pyro-seed0" in ids
    assert {"mnist-lenet5-split0-svi-numpyro-seed0", "mnist-lenet5-split0-svi-pyro-seed0"} <= ids


def test_the_mnist_mlp_runs_the_baselines_on_both_backends() -> None:
    cells = load_suite("mnist").cells()
    mlp = {(c.method, c.backend): c for c in cells if c.variant is None}
    for method in ("map", "ensemble", "laplace", "mcdropout", "swag"):
        assert {(method, "numpyro"), (method, "pyro")} <= set(mlp)
    # The last-layer GGN (4,010 weights), Gal's MNIST dropout rate, minibatch training.
    assert mlp["laplace", "pyro"].options["structure"] == "last_layer"
    assert mlp["mcdropout", "numpyro"].options["dropout_rate"] == 0.5
    assert all(c.options["batch_size"] == 128 for c in mlp.values())
    # The variants are VI's alone.
    assert {c.method for c in cells if c.variant is not None} == {"svi"}


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"name": "digits"}, "dataset 'digits' is listed twice; give each"),
        (
            {"name": "digits", "variant": "conv", "image": True, "model": {"layers": CONV}, "x": 1},
            r"unknown keys \['x'\]",
        ),
        ({"name": "digits", "variant": "Conv 5"}, "variant must be lower-case letters"),
        ({"name": "digits", "variant": 5}, "variant must be a non-empty string"),
        ({"name": "digits", "variant": "v", "image": "yes"}, "image must be true or false"),
        (
            {"name": "sine", "image": True, "model": {"layers": CONV}},
            "image = true needs an image set .*got 'sine'",
        ),
        (
            {"name": "digits", "variant": "v", "image": True},
            r"image = true loads \(N, H, W, 1\) inputs, which the MLP shorthand",
        ),
        (
            {"name": "digits", "variant": "v", "model": {"layers": CONV}},
            r"layers \['conv2d', 'flatten', 'max_pool2d'\] take images; set image = true",
        ),
        (
            {
                "name": "digits",
                "variant": "v",
                "image": True,
                "model": {"layers": CONV, "hidden": [3]},
            },
            r"layers describes the whole network; drop the MLP shorthand \['hidden'\]",
        ),
        (
            {"name": "digits", "variant": "v", "image": True, "model": {"layers": []}},
            "layers must be a list of layer tables",
        ),
        (
            {"name": "digits", "variant": "v", "image": True, "model": {"layers": "lenet"}},
            "layers must be a list of layer tables",
        ),
        (
            {
                "name": "digits",
                "variant": "v",
                "image": True,
                "model": {"layers": [{"kind": "rnn"}]},
            },
            "unknown layer kind 'rnn'",
        ),
        (
            {
                "name": "digits",
                "variant": "v",
                "image": True,
                "model": {"layers": [{**CONV[0], "padding": "full"}, *CONV[1:]]},
            },
            "padding",
        ),
        (
            {
                "name": "digits",
                "variant": "v",
                "image": True,
                "model": {"layers": [{"kind": "flatten"}, {"kind": "dense", "units": 3}]},
            },
            r"layers on inputs of shape \(8, 8, 1\)",
        ),
        (
            {
                "name": "digits",
                "variant": "v",
                "image": True,
                "model": {"layers": [{"kind": "conv2d", "out_channels": 2, "kernel_size": 9}]},
            },
            r"layers on inputs of shape \(8, 8, 1\)",
        ),
        (
            {
                "name": "digits",
                "variant": "v",
                "image": True,
                "model": {"layers": CONV, "prior": {"kind": "scale_mixture", "pi": 2.0}},
            },
            "prior must be a prior table or one per layer",
        ),
    ],
)
def test_bad_variants_images_and_layers_are_named(entry: dict, match: str) -> None:
    with pytest.raises(SuiteError, match=match):
        parse_suite(_with_dataset(entry))


def test_two_listings_with_the_same_variant_are_refused() -> None:
    entry = {"name": "digits", "variant": "wide", "model": {"hidden": [32]}}
    with pytest.raises(SuiteError, match="listed twice with variant 'wide'"):
        parse_suite(_suite(datasets=[entry, entry]))
