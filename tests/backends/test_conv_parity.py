"""Convolution, pooling and flattening give the same numbers on both backends, agree with a
plain NumPy loop, and batch over draws: S draws at once equal S single forward passes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppl_bnn import BNN
from ppl_bnn.backends.numpyro.ops import PPL_NUMPYRO
from ppl_bnn.backends.pyro.ops import PPL_PYRO
from ppl_bnn.engine.registry import backend_names, get_backend
from ppl_bnn.layers import AvgPool2d, Conv2d, Dense, Flatten, MaxPool2d
from ppl_bnn.model.program import forward

RTOL = 1e-5


def _reference_conv(x: np.ndarray, w: np.ndarray, stride, padding) -> np.ndarray:
    """Cross-correlation of (N, H, W, C) images with (kh, kw, C, O) filters, by loops."""
    (top, bottom), (left, right) = padding
    x = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    kh, kw, _, out = w.shape
    rows = (x.shape[1] - kh) // stride[0] + 1
    cols = (x.shape[2] - kw) // stride[1] + 1
    y = np.zeros((x.shape[0], rows, cols, out))
    for i in range(rows):
        for j in range(cols):
            patch = x[:, i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw]
            y[:, i, j] = np.einsum("nabc,abco->no", patch, w)
    return y


def _reference_pool(x: np.ndarray, reduce: str, size) -> np.ndarray:
    rows, cols = x.shape[-3] // size[0], x.shape[-2] // size[1]
    y = np.zeros((*x.shape[:-3], rows, cols, x.shape[-1]))
    fn = np.max if reduce == "max" else np.mean
    for i in range(rows):
        for j in range(cols):
            window = x[..., i * size[0] : (i + 1) * size[0], j * size[1] : (j + 1) * size[1], :]
            y[..., i, j, :] = fn(window, axis=(-3, -2))
    return y


def _both(op: str, *args):
    """``op`` of both backends on the same numpy arrays, as numpy."""
    jax_out = getattr(PPL_NUMPYRO, op)(*args)
    torch_args = [torch.as_tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    return np.asarray(jax_out), getattr(PPL_PYRO, op)(*torch_args).numpy()


CONVS = [
    pytest.param((3, 3), 1, "valid", id="k3-s1-valid"),
    pytest.param((3, 3), 1, "same", id="k3-s1-same"),
    pytest.param((4, 2), 1, "same", id="k4x2-s1-same-even"),
    pytest.param((3, 3), 2, "same", id="k3-s2-same"),
    pytest.param((2, 4), (2, 3), "same", id="k2x4-s2x3-same"),
    pytest.param((4, 4), 2, "valid", id="k4-s2-valid"),
    pytest.param((1, 1), 1, "valid", id="k1"),
]


@pytest.mark.parametrize(("kernel", "stride", "padding"), CONVS)
def test_conv_matches_a_numpy_loop_on_both_backends(kernel, stride, padding):
    rng = np.random.default_rng(0)
    layer = Conv2d(3, kernel, stride=stride, padding=padding)
    x = rng.normal(size=(2, 9, 7, 2)).astype(np.float32)  # non-square, odd and even sizes
    w = rng.normal(size=(*layer.kernel_size, 2, 3)).astype(np.float32)
    pads = layer.padding_amounts(x.shape[1:])
    expected = _reference_conv(x, w, layer.stride, pads)
    assert expected.shape[1:] == layer.output_shape(x.shape[1:])
    for got in _both("conv2d", x, w, layer.stride, pads):
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-5)


def test_same_padding_matches_jax_same():
    """The explicit amounts reproduce ``lax.conv_general_dilated(padding="SAME")``."""
    from jax import lax

    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 8, 7, 2)).astype(np.float32)
    for kernel, stride in [((3, 3), (1, 1)), ((4, 2), (2, 2)), ((2, 3), (3, 2)), ((5, 5), (2, 1))]:
        w = rng.normal(size=(*kernel, 2, 3)).astype(np.float32)
        layer = Conv2d(3, kernel, stride=stride, padding="same")
        expected = lax.conv_general_dilated(
            x, w, stride, "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        for got in _both("conv2d", x, w, layer.stride, layer.padding_amounts(x.shape[1:])):
            np.testing.assert_allclose(got, np.asarray(expected), rtol=RTOL, atol=1e-5)


@pytest.mark.parametrize("reduce", ["max", "avg"])
@pytest.mark.parametrize("size", [(2, 2), (3, 2), (1, 3)])
def test_pooling_drops_leftover_edges_on_both_backends(reduce, size):
    x = np.random.default_rng(2).normal(size=(3, 2, 7, 5, 2)).astype(np.float32)
    expected = _reference_pool(x, reduce, size)
    assert expected.shape == (3, 2, 7 // size[0], 5 // size[1], 2)
    for got in _both("pool", x, reduce, size):
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=1e-6)


def test_the_leftover_row_and_column_are_ignored():
    """A huge value in the last row and column of a 5x5 image changes no 2x2 max."""
    x = np.zeros((1, 5, 5, 1), dtype=np.float32)
    x[0, 4, :, 0] = x[0, :, 4, 0] = 1e6
    for got in _both("pool", x, "max", (2, 2)):
        np.testing.assert_array_equal(got, np.zeros((1, 2, 2, 1)))


@pytest.mark.parametrize("x_batched", [False, True])
def test_conv_over_draws_equals_one_draw_at_a_time(x_batched):
    """Filters (S, kh, kw, C, O) over shared images (N, H, W, C) or per-draw images
    (S, N, H, W, C) give each draw's own convolution (torch: stacked or grouped filters)."""
    rng = np.random.default_rng(3)
    draws, stride, pads = 4, (2, 1), ((1, 1), (0, 1))
    w = rng.normal(size=(draws, 3, 2, 2, 3)).astype(np.float32)
    x = rng.normal(size=((draws,) if x_batched else ()) + (2, 6, 5, 2)).astype(np.float32)
    for got in _both("conv2d", x, w, stride, pads):
        for s in range(draws):
            one = _reference_conv(x[s] if x_batched else x, w[s], stride, pads)
            np.testing.assert_allclose(got[s], one, rtol=RTOL, atol=1e-5)
    # Broadcasting batch axes: images (1, S, ...) under filters (S, ...) -> (1, S, ...).
    if x_batched:
        for got in _both("conv2d", x[None], w, stride, pads):
            assert got.shape[:2] == (1, draws)


NETWORKS = {
    "lenet-like": [
        Conv2d(3, 3, padding="same", activation="relu"), MaxPool2d(2),
        Conv2d(4, (2, 3), stride=2, padding="same", activation="tanh"), AvgPool2d(1),
        Flatten(), Dense(5, "gelu"), Dense(3),
    ],
    "valid-avg": [
        Conv2d(2, (4, 2), activation="sigmoid"), AvgPool2d((2, 3)), Flatten(), Dense(3),
    ],
    "strided-max-leftover": [
        Conv2d(2, 2, stride=(2, 1), padding="valid", activation="relu"), MaxPool2d(2),
        Conv2d(2, 1), Flatten(), Dense(3),
    ],
}  # fmt: skip


def _image_model(stack, likelihood: str) -> BNN:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(12, 9, 7, 2))  # non-square
    if likelihood == "categorical":
        return BNN(x, rng.integers(0, 3, size=12), layers=stack, likelihood="categorical")
    stack = [*stack[:-1], Dense(1)]
    return BNN(x, rng.normal(size=12), layers=stack, noise="learned")


@pytest.mark.parametrize("likelihood", ["categorical", "gaussian"])
@pytest.mark.parametrize("name", list(NETWORKS))
def test_log_density_and_gradients_agree(name, likelihood):
    model = _image_model(NETWORKS[name], likelihood)
    params = model.init_params(seed=1)
    lp_numpyro = model.log_density(params, backend="numpyro")
    lp_pyro = model.log_density(params, backend="pyro")
    assert np.isfinite(lp_numpyro)
    np.testing.assert_allclose(lp_numpyro, lp_pyro, rtol=RTOL)
    g_numpyro = model.grad_log_density(params, backend="numpyro")
    g_pyro = model.grad_log_density(params, backend="pyro")
    for site in params:
        scale = float(np.max(np.abs(g_pyro[site])))
        assert scale > 0, site
        np.testing.assert_allclose(
            g_numpyro[site], g_pyro[site], rtol=1e-4, atol=1e-5 * scale, err_msg=site
        )


def test_conv_parity_is_sensitive_to_the_filters():
    """Guard against a vacuous check: moving one filter changes both log densities alike."""
    model = _image_model(NETWORKS["lenet-like"], "categorical")
    params = model.init_params(seed=1)
    moved = {**params, "w1": params["w1"] + 0.3}
    before = {b: model.log_density(params, b) for b in ("numpyro", "pyro")}
    after = {b: model.log_density(moved, b) for b in ("numpyro", "pyro")}
    assert after["numpyro"] != pytest.approx(before["numpyro"], rel=1e-3)
    np.testing.assert_allclose(after["numpyro"], after["pyro"], rtol=RTOL)


@pytest.mark.parametrize("backend", backend_names())
def test_forward_over_draws_equals_single_forwards(backend):
    """The program's forward pass with draws (S, ...) on shared images equals S single passes,
    and the backend's forward over draws gives the same."""
    model = _image_model(NETWORKS["lenet-like"], "categorical")
    draws = [model.init_params(seed=s) for s in range(5)]
    stacked = {k: np.stack([d[k] for d in draws]) for k in draws[0]}
    ppl, to_array = {
        "numpyro": (PPL_NUMPYRO, np.asarray),
        "pyro": (PPL_PYRO, torch.as_tensor),
    }[backend]
    x = to_array(model.x)
    batched = np.asarray(forward(model.spec, {k: to_array(v) for k, v in stacked.items()}, x, ppl))
    singles = np.stack(
        [np.asarray(forward(model.spec, {k: to_array(v) for k, v in d.items()}, x, ppl))
         for d in draws]
    )  # fmt: skip
    assert batched.shape == (5, 12, 3)
    np.testing.assert_allclose(batched, singles, rtol=RTOL, atol=1e-5)
    over_draws = get_backend(backend).forward_draws(model.spec, stacked, model.x)
    np.testing.assert_allclose(over_draws, singles, rtol=RTOL, atol=1e-5)


def test_forward_over_draws_agrees_across_backends():
    model = _image_model(NETWORKS["strided-max-leftover"], "categorical")
    stacked = {
        k: np.stack([model.init_params(seed=s)[k] for s in range(3)]) for k in model.init_params(0)
    }
    f = {b: get_backend(b).forward_draws(model.spec, stacked, model.x) for b in ("numpyro", "pyro")}
    np.testing.assert_allclose(f["numpyro"], f["pyro"], rtol=RTOL, atol=1e-5)


def test_draws_per_batch_counts_the_feature_maps():
    """16 'same' feature maps of 8x8 images are 1,024 floats per example, not the input's 64."""
    from ppl_bnn.engine.contracts import _BATCH_FLOATS, draws_per_batch
    from ppl_bnn.model.spec import BNNSpec

    spec = BNNSpec(
        input_shape=(8, 8, 1),
        layers=(Conv2d(16, 3, padding="same"), MaxPool2d(2), Flatten(), Dense(1)),
        noise=0.1,
    )
    assert max(spec.widths) == 8 * 8 * 16
    assert draws_per_batch(spec, 4) == _BATCH_FLOATS // (4 * 1024)
