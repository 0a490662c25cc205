"""Layers as objects, and networks given layer by layer: the same spec as the MLP shorthand,
and errors that name what does not fit."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, layers, priors
from ppl_bnn.model.layers import Dense, layer_from_dict
from ppl_bnn.model.spec import BNNSpec

X = np.linspace(-1, 1, 12)[:, None]
Y = np.sin(3 * X[:, 0])


def test_layers_give_the_same_spec_as_the_mlp_shorthand():
    given = BNN(
        X, Y, layers=[Dense(5, "relu"), Dense(4, "relu"), Dense(1)], prior=priors.Normal(0.5),
        noise=0.1,
    )  # fmt: skip
    shorthand = BNN(X, Y, hidden=(5, 4), activation="relu", prior_scale=0.5, noise=0.1)
    assert given.spec == shorthand.spec
    assert given.init_params(seed=1).keys() == shorthand.init_params(seed=1).keys()


def test_one_prior_per_layer():
    model = BNN(
        X, Y, layers=[Dense(3, "tanh"), Dense(1)],
        prior=[priors.Normal(2.0), priors.Normal(0.1)], noise=0.1,
    )  # fmt: skip
    assert {s.name: s.prior.scale for s in model.spec.sites()} == {
        "w0": 2.0, "b0": 2.0, "w1": 0.1, "b1": 0.1,
    }  # fmt: skip


def test_prior_with_the_shorthand_replaces_prior_scale():
    model = BNN(X, Y, hidden=(3,), prior=priors.Normal(0.2), noise=0.1)
    assert model.spec.layer_scales == (0.2, 0.2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"layers": [Dense(3, "tanh"), Dense(2)]}, r"outputs of shape \(2,\).* needs 1 output"),
        ({"layers": [Dense(3), "dense"]}, "not a layer: 'dense'"),
        ({"layers": []}, "layers must be a non-empty sequence"),
        ({"layers": [Dense(1)], "hidden": (4,)}, r"drop the MLP shorthand \['hidden'\]"),
        ({"layers": [Dense(1)], "activation": "relu"}, r"drop the MLP shorthand \['activation'\]"),
        (
            {"layers": [Dense(3, "tanh"), Dense(1)], "prior": [priors.Normal(1.0)] * 3},
            "3 priors given but the network has 2 layers",
        ),
        ({"layers": [Dense(1)], "prior": 1.0}, "priors must be a prior or one prior per layer"),
        ({"prior": priors.Normal(1.0), "prior_scale": 2.0}, "give prior= or prior_scale="),
    ],
)
def test_bad_layer_specs_name_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BNN(X, Y, noise=0.1, **kwargs)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Dense(0), "Dense units must be a positive integer"),
        (lambda: Dense(3, "swish"), "unknown activation 'swish'; allowed: relu"),
        (lambda: layer_from_dict({"kind": "conv9d"}), "unknown layer kind 'conv9d'"),
    ],
)
def test_bad_layers_are_rejected(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_layer_spec_round_trips_through_dict():
    spec = BNNSpec(
        input_dim=2,
        layers=(layers.Dense(4, "gelu"), layers.Dense(3)),
        priors=(priors.Normal(1.0), priors.Normal(0.5)),
        likelihood="categorical",
        num_classes=3,
    )
    assert BNNSpec.from_dict(spec.to_dict()) == spec
    assert spec.site_dims()["w1"] == ["layer1_in", "layer1_out"]
