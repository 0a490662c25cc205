"""Convolution, pooling and flattening layers: shapes, site names, dict form and named errors."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, layers
from ppl_bnn.model.layers import Conv2d, Dense, Flatten, MaxPool2d, layer_from_dict, same_padding
from ppl_bnn.model.spec import BNNSpec


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "expected"),
    [
        (7, 3, 1, (1, 1)),
        (7, 4, 1, (1, 2)),  # even kernel: the odd one after
        (7, 3, 2, (1, 1)),  # out 4: (4 - 1) 2 + 3 - 7 = 2
        (8, 3, 2, (0, 1)),  # out 4: (4 - 1) 2 + 3 - 8 = 1
        (6, 1, 3, (0, 0)),
        (2, 5, 1, (2, 2)),  # kernel larger than the input
    ],
)
def test_same_padding_follows_the_tensorflow_rule(size, kernel, stride, expected):
    assert same_padding(size, kernel, stride) == expected
    before, after = expected
    assert (size + before + after - kernel) // stride + 1 == -(-size // stride)


@pytest.mark.parametrize(
    ("layer", "input_shape", "output_shape"),
    [
        (Conv2d(4, 3), (7, 6, 2), (5, 4, 4)),
        (Conv2d(4, 3, padding="same"), (7, 6, 2), (7, 6, 4)),
        (Conv2d(4, (2, 3), stride=2, padding="same"), (7, 6, 2), (4, 3, 4)),
        (Conv2d(4, (2, 3), stride=(2, 1)), (7, 6, 2), (3, 4, 4)),
        (MaxPool2d(2), (7, 5, 3), (3, 2, 3)),
        (layers.AvgPool2d((3, 2)), (7, 5, 3), (2, 2, 3)),
        (Flatten(), (3, 2, 4), (24,)),
    ],
)
def test_output_shapes(layer, input_shape, output_shape):
    assert layer.output_shape(input_shape) == output_shape


def test_conv_parameters_are_hwio_and_parameter_free_layers_keep_the_site_names():
    spec = BNNSpec(
        input_shape=(8, 8, 1),
        layers=(
            Conv2d(3, 3, activation="relu"), MaxPool2d(2), Conv2d(2, (2, 1), padding="same"),
            layers.AvgPool2d(1), Flatten(), Dense(4, "tanh"), Dense(1),
        ),
        noise=0.1,
    )  # fmt: skip
    shapes = {s.name: s.shape for s in spec.sites()}
    assert shapes == {
        "w0": (3, 3, 1, 3), "b0": (3,), "w1": (2, 1, 3, 2), "b1": (2,),
        "w2": (18, 4), "b2": (4,), "w3": (4, 1), "b3": (1,),
    }  # fmt: skip
    assert spec.site_dims()["w0"] == ["layer0_kh", "layer0_kw", "layer0_in", "layer0_out"]
    assert spec.input_dim == 64
    assert spec.widths == (64, 108, 27, 18, 18, 18, 4, 1)


def test_image_spec_round_trips_through_dict_and_flat_specs_keep_their_old_form():
    spec = BNNSpec(
        input_shape=(6, 5, 2),
        layers=(
            Conv2d(2, (3, 2), stride=(2, 1), padding="same", activation="gelu"),
            layers.AvgPool2d(2), MaxPool2d((1, 2)), Flatten(), Dense(3),
        ),
        likelihood="categorical",
        num_classes=3,
    )  # fmt: skip
    data = spec.to_dict()
    assert data["input_shape"] == [6, 5, 2] and "input_dim" not in data
    assert BNNSpec.from_dict(data) == spec
    for layer in spec.layers:
        assert layer_from_dict(layer.to_dict()) == layer
    flat = BNNSpec.mlp(input_dim=3, hidden=(4,), noise=0.1)
    assert flat.to_dict()["input_dim"] == 3 and "input_shape" not in flat.to_dict()
    assert flat.input_shape == (3,)
    assert BNNSpec.from_dict(flat.to_dict()) == flat


def test_int_and_pair_sizes_give_equal_layers():
    assert Conv2d(2, 3) == Conv2d(2, (3, 3), stride=(1, 1))
    assert MaxPool2d(2) == MaxPool2d([2, 2])
    assert MaxPool2d(2) != layers.AvgPool2d(2)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Conv2d(0, 3), "Conv2d out_channels must be a positive integer"),
        (lambda: Conv2d(2, 0), "Conv2d kernel_size must be a positive integer or a pair"),
        (lambda: Conv2d(2, (3, 3, 3)), "Conv2d kernel_size must be a positive integer or a pair"),
        (lambda: Conv2d(2, 3, stride=-1), "Conv2d stride must be a positive integer or a pair"),
        (lambda: Conv2d(2, 3, "same"), "Conv2d stride must be a positive integer or a pair"),
        (lambda: Conv2d(2, 3, padding="full"), "unknown Conv2d padding 'full'; allowed: valid"),
        (lambda: Conv2d(2, 3, activation="swish"), "unknown activation 'swish'"),
        (lambda: MaxPool2d(0), "MaxPool2d size must be a positive integer or a pair"),
        (lambda: layers.AvgPool2d(2.5), "AvgPool2d size must be a positive integer or a pair"),
    ],
)
def test_bad_layer_arguments_are_named(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize(
    ("input_shape", "stack", "match"),
    [
        ((4, 4, 1), [Conv2d(2, 5), Flatten(), Dense(1)], r"kernel \(5, 5\) is larger than its "),
        ((4, 4, 1), [MaxPool2d(5), Flatten(), Dense(1)], r"window \(5, 5\) is larger than its"),
        ((16,), [Conv2d(2, 3), Flatten(), Dense(1)], r"Conv2d takes images \(H, W, C\)"),
        ((16,), [MaxPool2d(2), Dense(1)], r"MaxPool2d takes images \(H, W, C\), got .*\(16,\)"),
        ((16,), [Flatten(), Dense(1)], r"Flatten takes images \(H, W, C\)"),
        ((4, 4, 1), [Conv2d(2, 3), Dense(1)], "Dense takes flat inputs.*flatten first"),
        ((4, 4, 1), [Conv2d(2, 3)], r"outputs of shape \(2, 2, 2\).* needs 1 output"),
    ],
)
def test_networks_that_do_not_fit_their_input_are_named(input_shape, stack, match):
    with pytest.raises(ValueError, match=match):
        BNNSpec(input_shape=input_shape, layers=stack, noise=0.1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "give input_dim .* or input_shape"),
        ({"input_shape": (4, 0, 1)}, "input_shape must be a non-empty sequence of positive"),
        ({"input_shape": ()}, "input_shape must be a non-empty sequence of positive"),
        ({"input_shape": (4, 4, 1), "input_dim": 15}, r"input_dim 15 disagrees with input_shape"),
    ],
)
def test_bad_input_shapes_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BNNSpec(layers=(Flatten(), Dense(1)), noise=0.1, **kwargs)


IMAGES = np.random.default_rng(0).normal(size=(5, 6, 6, 1))
LABELS = np.array([0, 1, 2, 1, 0])
STACK = [Conv2d(2, 3, padding="same", activation="relu"), MaxPool2d(2), Flatten(), Dense(3)]


def test_bnn_takes_images_with_a_layer_list():
    model = BNN(IMAGES, LABELS, layers=STACK, likelihood="categorical")
    assert model.spec.input_shape == (6, 6, 1)
    assert model.x.shape == (5, 6, 6, 1) and model.x.dtype == np.float32
    assert BNN.from_spec(model.spec, IMAGES[:2], LABELS[:2]).spec == model.spec


@pytest.mark.parametrize(
    ("x", "kwargs", "match"),
    [
        (IMAGES, {}, r"the MLP shorthand \(hidden=...\) takes flat inputs"),
        (IMAGES[..., 0], {"layers": STACK}, r"need a channel axis: x\[\.\.\., None\]"),
        (IMAGES[:, None], {"layers": STACK}, r"images must be 4-dimensional \(N, H, W, C\)"),
    ],
)
def test_bad_image_inputs_are_named(x, kwargs, match):
    with pytest.raises(ValueError, match=match):
        BNN(x, LABELS, likelihood="categorical", **kwargs)


def test_images_of_another_shape_are_named():
    spec = BNN(IMAGES, LABELS, layers=STACK, likelihood="categorical").spec
    with pytest.raises(ValueError, match=r"x has examples of shape \(6, 5, 1\) but the model was "):
        BNN.from_spec(spec, IMAGES[:, :, :5], LABELS)
    with pytest.raises(ValueError, match=r"x has examples of shape \(36,\) but the model was"):
        BNN.from_spec(spec, IMAGES.reshape(5, -1), LABELS)
    bad = IMAGES.copy()
    bad[2, 1, 1, 0] = np.nan
    with pytest.raises(ValueError, match=r"non-finite values \(NaN or inf\) in 1 row"):
        BNN.from_spec(spec, bad, LABELS)
