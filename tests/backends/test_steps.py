"""NumPyro's optimisation steps one compiled call each (a network with convolutions on the CPU,
:func:`~ppl_bnn.backends.numpyro.steps.steps_in_loop`) give the fit the compiled loop gives, with
the same training-curve checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.backends.numpyro import autoguide, meanfield
from ppl_bnn.backends.numpyro.steps import steps_in_loop
from ppl_bnn.layers import Conv2d, Dense, Flatten, MaxPool2d


@pytest.fixture(scope="module")
def conv_model() -> BNN:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 6, 6, 1))
    y = (x[:, :3].sum(axis=(1, 2, 3)) > x[:, 3:].sum(axis=(1, 2, 3))).astype(int)
    stack = [Conv2d(2, 3, padding="same", activation="relu"), MaxPool2d(2), Flatten(), Dense(2)]
    return BNN(x, y, layers=stack, likelihood="categorical", num_classes=2)


def test_only_convolutional_networks_step_in_a_loop(conv_model: BNN) -> None:
    rng = np.random.default_rng(0)
    dense = BNN(rng.normal(size=(10, 3)), rng.normal(size=10), hidden=(4,), noise=0.5)
    assert steps_in_loop(conv_model.spec) and not steps_in_loop(dense.spec)


@pytest.mark.parametrize(
    ("method", "driver", "options"),
    [
        ("svi", meanfield, {"estimator": "flipout", "init_loc": "prior"}),
        ("svi", autoguide, {"init_loc": "prior"}),
        ("map", autoguide, {"keep": "last"}),
    ],
)
def test_a_step_loop_gives_the_compiled_loops_fit(
    conv_model: BNN, monkeypatch: pytest.MonkeyPatch, method: str, driver, options: dict
) -> None:
    common = {"num_steps": 25, "batch_size": 8, **options}
    if method == "svi":
        common |= {"num_draws": 4, "curve_every": 10}
    validation = (conv_model.x[:8], conv_model.y[:8]) if method == "svi" else None
    looped = fit(conv_model, method, seed=3, validation=validation, **common)
    monkeypatch.setattr(driver, "steps_in_loop", lambda spec: False)
    scanned = fit(conv_model, method, seed=3, validation=validation, **common)
    np.testing.assert_allclose(looped.losses, scanned.losses, rtol=1e-4, atol=1e-4)
    for site, draws in scanned.draws.items():
        np.testing.assert_allclose(looped.draws[site], draws, rtol=1e-4, atol=1e-5)
    if method == "svi":
        curve, expected = looped.info["training_curve"], scanned.info["training_curve"]
        assert curve["step"] == expected["step"] and curve["step"][-1] == 25
        np.testing.assert_allclose(curve["loss"], expected["loss"], rtol=1e-4)
