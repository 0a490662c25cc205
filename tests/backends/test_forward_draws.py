"""The forward pass over draws, a few draws at a time, equals each draw's own forward pass."""

from __future__ import annotations

import numpy as np
import pytest

import ppl_bnn.engine.contracts as backends_base
from ppl_bnn import BNN
from ppl_bnn.engine.contracts import draws_per_batch
from ppl_bnn.engine.registry import backend_names, get_backend


def _reference(params: dict[str, np.ndarray], x: np.ndarray, layers: int) -> np.ndarray:
    out = []
    for s in range(params["w0"].shape[0]):
        h = x
        for layer in range(layers):
            h = h @ params[f"w{layer}"][s] + params[f"b{layer}"][s]
            if layer < layers - 1:
                h = np.tanh(h)
        out.append(h)
    return np.stack(out)


@pytest.mark.parametrize("draws", [1, 7])
@pytest.mark.parametrize("backend", backend_names())
def test_batched_forward_over_draws_matches_each_draw(backend, draws, monkeypatch):
    """With the tests' two JAX host devices, NumPyro's 7 draws go 4 + 4 (one repeated) to the
    two devices, each in batches of 2; a single draw stays on one device."""
    rng = np.random.default_rng(3)
    x_train, y_train = rng.normal(size=(9, 2)), rng.normal(size=9)
    model = BNN(x_train, y_train, hidden=(4, 3), activation="tanh", noise=0.5)
    spec = model.spec
    params = {
        site.name: rng.normal(size=(draws, *site.shape)).astype(np.float32) for site in spec.sites()
    }
    x = rng.normal(size=(5, 2)).astype(np.float32)
    # 2 draws per batch: Pyro's 7 draws go in batches of 2, 2, 2 and a remainder of 1.
    monkeypatch.setattr(backends_base, "_BATCH_FLOATS", 2 * 5 * 4)
    assert draws_per_batch(spec, 5) == 2
    if backend == "numpyro":
        import jax

        assert jax.local_device_count() == 2
    f = get_backend(backend).forward_draws(spec, params, x)
    assert f.shape == (draws, 5, 1)
    np.testing.assert_allclose(f, _reference(params, x, 3), rtol=1e-5, atol=1e-5)


def test_draws_per_batch_keeps_a_batch_of_activations_cache_sized():
    spec = BNN(np.zeros((3, 10)), np.zeros(3), hidden=(50,), noise=0.5).spec
    assert draws_per_batch(spec, 10_000) == 1
    assert draws_per_batch(spec, 32) == 2**19 // (32 * 50)
    assert draws_per_batch(spec, 10**9) == 1
