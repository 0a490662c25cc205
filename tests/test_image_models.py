"""A small convolutional BNN end to end on both backends: fit by SVI and NUTS, predict images,
save and load, ArviZ dims."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, FitResult, fit
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.layers import Conv2d, Dense, Flatten, MaxPool2d

FITS = {
    "svi": {"num_steps": 30, "num_draws": 6},
    "nuts": {"num_warmup": 10, "num_samples": 6, "max_tree_depth": 3},
}
BACKEND_OPTIONS = {"numpyro": {}, "pyro": {"nuts": {"potential": "eager"}}}


@pytest.fixture(scope="module")
def model() -> BNN:
    """6x6x1 images whose class is which half (top, bottom, neither) is brighter."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 6, 6, 1))
    top, bottom = x[:, :3].sum(axis=(1, 2, 3)), x[:, 3:].sum(axis=(1, 2, 3))
    y = np.where(top > bottom + 1, 0, np.where(bottom > top + 1, 1, 2))
    stack = [Conv2d(2, 3, padding="same", activation="relu"), MaxPool2d(2), Flatten(), Dense(3)]
    return BNN(x, y, layers=stack, likelihood="categorical", num_classes=3)


@pytest.mark.parametrize("method", list(FITS))
@pytest.mark.parametrize("backend", backend_names())
def test_conv_bnn_fits_predicts_and_round_trips(model, backend, method, tmp_path):
    options = {**FITS[method], **BACKEND_OPTIONS[backend].get(method, {})}
    result = fit(model, method, backend=backend, seed=0, **options)
    assert result.draws["w0"].shape[-4:] == (3, 3, 1, 2)
    assert result.draws["w1"].shape[-2:] == (18, 3)
    images = model.x[:5]
    prediction = result.predict(images)
    assert prediction.probs.shape == (5, 3)
    np.testing.assert_allclose(prediction.probs.sum(axis=1), 1.0, rtol=1e-5)
    assert np.isfinite(result.log_likelihood).all()
    with pytest.raises(ValueError, match=r"examples of shape \(36,\) but the model was built"):
        result.predict(images.reshape(5, -1))

    idata = result.to_arviz()
    assert idata.posterior["w0"].dims[-4:] == ("layer0_kh", "layer0_kw", "layer0_in", "layer0_out")

    loaded = FitResult.load(result.save(tmp_path / "fit"))
    assert loaded.spec == model.spec
    np.testing.assert_allclose(loaded.predict(images).probs, prediction.probs, rtol=1e-6)


def test_conv_fits_agree_on_the_log_likelihood_of_their_draws(model):
    """The per-draw log-likelihood a Pyro fit stores equals NumPyro's for the same draws."""
    from ppl_bnn.predictive import log_likelihood_per_draw, predictive_at

    result = fit(model, "svi", backend="pyro", seed=1, **FITS["svi"])
    f = predictive_at("numpyro", model.spec, result.draws, model.x).f
    ll = log_likelihood_per_draw(model.spec, f, None, model.y)
    np.testing.assert_allclose(ll, result.log_likelihood.reshape(ll.shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("method", "options"),
    [("svi", {"num_particles": 2}), ("lowrank", {})],
    ids=["vectorised-particles", "joint-guide"],
)
def test_pyro_batch_dims_of_particles_and_joint_guides_reach_the_convolution(
    model, method, options
):
    """Pyro draws filters (P, 1, kh, kw, C, O) under its particle plate and (S, kh, kw, C, O)
    from a joint guide; both run through the batched convolution."""
    result = fit(model, method, backend="pyro", seed=0, num_steps=5, num_draws=4, **options)
    assert np.isfinite(result.losses).all()
    assert result.predict(model.x[:3]).probs.shape == (3, 3)
