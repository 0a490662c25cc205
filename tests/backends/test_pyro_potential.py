"""The flat-vector Pyro potential equals Pyro's own per-site potential, in every mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pyro.infer.mcmc.util import initialize_model

from ppl_bnn.backends.pyro import ops as pyro_backend
from ppl_bnn.backends.pyro.potential import FlatPotential
from ppl_bnn.model.flat import FlatLayout
from tests.backends.test_parity import _model

CASES = [
    pytest.param((6,), "relu", {"noise": 0.3}, id="relu-known-noise"),
    pytest.param((5, 4), "gelu", {"noise": "learned"}, id="gelu-learned-noise"),
    pytest.param((5, 3), "tanh", {"likelihood": "categorical"}, id="tanh-categorical"),
]


def _pyro_reference(model, z: np.ndarray) -> tuple[float, np.ndarray]:
    """Value and gradient of the potential that Pyro's ``initialize_model`` builds."""
    x, y = pyro_backend.data(model.spec, model.x, model.y)
    _, potential_fn, _, _ = initialize_model(pyro_backend.model(model.spec), model_args=(x, y))
    layout = FlatLayout.of(model.spec)
    params = {k: v.clone().requires_grad_() for k, v in layout.unflatten(torch.tensor(z)).items()}
    value = potential_fn(params)
    grads = torch.autograd.grad(value, list(params.values()))
    flat = layout.flatten({k: g.numpy() for k, g in zip(params, grads, strict=True)})
    return float(value.detach()), flat


@pytest.mark.parametrize(("hidden", "activation", "kwargs"), CASES)
@pytest.mark.parametrize("mode", ["compiled", "traced", "eager"])
def test_flat_potential_equals_pyros_potential(hidden, activation, kwargs, mode):
    model = _model(hidden, activation, kwargs)
    x, y = pyro_backend.data(model.spec, model.x, model.y)
    potential = FlatPotential(model.spec, x, y, mode=mode)
    assert potential.mode == mode
    rng = np.random.default_rng(3)
    for _ in range(3):
        z = rng.uniform(-2, 2, size=potential.size).astype(np.float32)
        expected_value, expected_grad = _pyro_reference(model, z)
        z_t = torch.tensor(z, requires_grad=True)
        value = potential(z_t)
        (grad,) = torch.autograd.grad(value, [z_t])
        np.testing.assert_allclose(float(value.detach()), expected_value, rtol=1e-5)
        scale = np.abs(expected_grad).max()
        np.testing.assert_allclose(grad.numpy(), expected_grad, rtol=0, atol=1e-5 * scale)


def test_flat_potential_takes_minibatches_of_its_shape():
    model = _model((4,), "tanh", {"noise": "learned"})
    x, y = pyro_backend.data(model.spec, model.x, model.y)
    half = FlatPotential(model.spec, x[:20], y[:20], likelihood_scale=2.0, mode="compiled")
    z = torch.zeros(half.size)
    for batch in (slice(0, 20), slice(20, 40)):
        expected = half.energy(z, x[batch], y[batch])
        np.testing.assert_allclose(float(half(z, x[batch], y[batch])), float(expected), rtol=1e-6)


def test_constrained_draws_map_precision_to_its_support():
    model = _model((3,), "tanh", {"noise": "learned"})
    x, y = pyro_backend.data(model.spec, model.x, model.y)
    potential = FlatPotential(model.spec, x, y, mode="eager")
    z = np.random.default_rng(0).normal(size=(7, potential.size)).astype(np.float32)
    draws = potential.constrained(z)
    assert draws["w0"].shape == (7, 3, 3)
    np.testing.assert_allclose(draws["precision"], np.exp(z[:, -1]), rtol=1e-6)
    np.testing.assert_array_equal(draws["b1"], z[:, -2:-1])


def test_unknown_mode_is_an_error():
    model = _model((), "tanh", {"noise": 0.3})
    x, y = pyro_backend.data(model.spec, model.x, model.y)
    with pytest.raises(ValueError, match="unknown potential mode 'fast'; available"):
        FlatPotential(model.spec, x, y, mode="fast")
