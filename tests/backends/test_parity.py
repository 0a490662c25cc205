"""The two backends compile the one spec to the same log density, site by site."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN

CASES = [
    pytest.param((), "tanh", {"noise": 0.3}, id="linear-known-noise"),
    pytest.param((6,), "relu", {"noise": 0.3}, id="relu-known-noise"),
    pytest.param((5, 4), "gelu", {"noise": "learned"}, id="gelu-learned-noise"),
    pytest.param((4,), "sigmoid", {"noise": "learned"}, id="sigmoid-learned-noise"),
    pytest.param((), "tanh", {"likelihood": "categorical"}, id="softmax-regression"),
    pytest.param((5, 3), "tanh", {"likelihood": "categorical"}, id="tanh-categorical"),
]


def _model(hidden, activation, kwargs) -> BNN:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(40, 3))
    if kwargs.get("likelihood") == "categorical":
        y = rng.integers(0, 4, size=40)
    else:
        y = rng.normal(size=40)
    return BNN(
        x, y, hidden=hidden, activation=activation, prior_scale=(1.0,) * (len(hidden) + 1), **kwargs
    )


@pytest.mark.parametrize(("hidden", "activation", "kwargs"), CASES)
@pytest.mark.parametrize("param_seed", [0, 1, 2])
def test_log_density_and_gradients_agree(hidden, activation, kwargs, param_seed):
    model = _model(hidden, activation, kwargs)
    params = model.init_params(param_seed)
    lp_numpyro = model.log_density(params, backend="numpyro")
    lp_pyro = model.log_density(params, backend="pyro")
    assert np.isfinite(lp_numpyro)
    np.testing.assert_allclose(lp_numpyro, lp_pyro, rtol=1e-5)

    g_numpyro = model.grad_log_density(params, backend="numpyro")
    g_pyro = model.grad_log_density(params, backend="pyro")
    assert set(g_numpyro) == set(g_pyro) == set(params)
    for name in params:
        # float32: agree to rtol 1e-5 relative to the size of that site's gradient.
        scale = float(np.max(np.abs(g_pyro[name])))
        np.testing.assert_allclose(
            g_numpyro[name], g_pyro[name], rtol=1e-5, atol=1e-5 * scale, err_msg=name
        )


def test_parity_is_sensitive_to_the_parameters():
    """Guard against a vacuous parity check: changing one weight changes both densities."""
    model = _model((6,), "relu", {"noise": 0.3})
    params = model.init_params(0)
    moved = {**params, "w1": params["w1"] + 0.5}
    for backend in ("numpyro", "pyro"):
        assert model.log_density(moved, backend) != pytest.approx(
            model.log_density(params, backend), rel=1e-3
        )
