"""Pyro SVI's fused Adam update is Pyro's ``SVI.step`` with ``pyro.optim.Adam``, made cheaper."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(24, 2))
    y = np.tanh(x[:, 0]) - x[:, 1] + 0.1 * rng.normal(size=24)
    return BNN(x, y, hidden=(5, 4), noise="learned")


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("method", ["svi", "map", "lowrank"])
def test_fused_update_follows_pyros_svi_step(model, method, jit):
    """Adam is elementwise, so one optimiser over all guide parameters takes the steps that Pyro's
    one-optimiser-per-parameter ``SVI.step`` takes: the same losses, and the same draws after."""
    options = {"num_steps": 60, "learning_rate": 0.05, "jit": jit}
    if method != "map":  # from a random start, so that the steps have something to optimise
        options.update(num_draws=20, init_loc="uniform")
    fused = fit(model, method, backend="pyro", seed=7, update="fused", **options)
    stock = fit(model, method, backend="pyro", seed=7, update="pyro", **options)
    assert (fused.info["update"], stock.info["update"]) == ("fused", "pyro")
    assert fused.losses[-1] < 0.8 * fused.losses[0], "the fit did not optimise"
    np.testing.assert_allclose(fused.losses, stock.losses, rtol=1e-5)
    for name in stock.draws:
        np.testing.assert_allclose(fused.draws[name], stock.draws[name], rtol=1e-4, atol=1e-5)
