"""The GGN Laplace against ``laplace-torch`` (Daxberger et al. 2021), the reference
implementation: the same MAP weights in an equivalent ``torch.nn.Sequential`` give the same GGN
posterior precision, log marginal likelihood and GLM predictive mean and variance, on a small
regression and a small classification net.

``nox -s tests`` installs ``laplace-torch`` without torchvision (see ``LAPLACE_TORCH`` in
``noxfile.py``: torchvision's only release for torch 2.13.0 on PyPI is a CUDA build that does
not load with the pinned CPU torch) and sets ``PPL_BNN_REQUIRE_LAPLACE_TORCH``, under which a
missing or broken ``laplace-torch`` fails this module instead of skipping it; elsewhere it is
skipped where ``laplace-torch`` cannot be imported.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

from ppl_bnn import BNN, fit
from ppl_bnn.methods import ggn

if os.environ.get("PPL_BNN_REQUIRE_LAPLACE_TORCH"):
    with warnings.catch_warnings():  # as importorskip: its imports warn (torch.jit.script)
        warnings.simplefilter("ignore")
        import laplace as laplace_torch
else:
    laplace_torch = pytest.importorskip("laplace", exc_type=ImportError)

#: torch 2.13 deprecates torch.jit.script, which its forward-mode AD (used by curvlinops) calls.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


def _sequential(params: dict[str, np.ndarray], widths: tuple[int, ...]) -> torch.nn.Sequential:
    """The tanh MLP of ``params`` as torch layers (a ``Linear`` weight is ours transposed),
    in float64."""
    layers: list[torch.nn.Module] = []
    for i in range(len(widths) - 1):
        linear = torch.nn.Linear(widths[i], widths[i + 1]).double()
        with torch.no_grad():
            linear.weight.copy_(torch.as_tensor(np.asarray(params[f"w{i}"], np.float64).T))
            linear.bias.copy_(torch.as_tensor(np.asarray(params[f"b{i}"], np.float64)))
        layers += [linear, torch.nn.Tanh()] if i < len(widths) - 2 else [linear]
    return torch.nn.Sequential(*layers)


def _torch_order(curv: ggn.Curvature, params, widths: tuple[int, ...]) -> np.ndarray:
    """Per position of torch's parameter vector (the last layer's for a last-layer GGN), the
    index in ours: a net whose weights are their own indices in our flat vector, read in
    torch's order."""
    labels = curv.layout.unflatten(np.arange(curv.layout.size, dtype=np.float64))
    net = _sequential({**{k: np.zeros(np.shape(v)) for k, v in params.items()}, **labels}, widths)
    if curv.structure == "last_layer":
        net = [m for m in net if isinstance(m, torch.nn.Linear)][-1]
    return torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy().astype(int)


def _compare(
    model: BNN, likelihood: str, widths, prior_precision, sigma=None, structure="full"
) -> None:
    params = {
        k: v[0, 0]
        for k, v in fit(model, "map", backend="pyro", num_steps=300, seed=0).draws.items()
    }
    curv = ggn.curvature("pyro", model.spec, params, model.x, model.y, structure)
    order = _torch_order(curv, params, widths)
    net = _sequential(params, widths)
    x = torch.as_tensor(model.x, dtype=torch.float64)
    if likelihood == "regression":
        y = torch.as_tensor(model.y, dtype=torch.float64)[:, None]
    else:
        y = torch.as_tensor(model.y, dtype=torch.long)
    # laplace-torch: one precision per parameter tensor (weight, bias), ours per layer.
    per_tensor = torch.as_tensor(np.repeat(np.atleast_1d(prior_precision), 2), dtype=torch.float64)
    la = laplace_torch.Laplace(
        net, likelihood, hessian_structure="full",
        subset_of_weights="last_layer" if structure == "last_layer" else "all",
        prior_precision=per_tensor if np.size(prior_precision) > 1 else float(prior_precision),
        **({"sigma_noise": sigma} if sigma is not None else {}),
    )  # fmt: skip
    la.fit(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=11))

    h = curv.precision(prior_precision, sigma)
    theirs = la.posterior_precision.detach().numpy()
    np.testing.assert_allclose(h[np.ix_(order, order)], theirs, rtol=1e-5, atol=1e-7 * h.max())
    np.testing.assert_allclose(
        curv.log_marginal_likelihood(prior_precision, sigma),
        float(la.log_marginal_likelihood()),
        rtol=1e-6,
    )
    x_new = np.linspace(-2, 2, 7)[:, None].repeat(model.x.shape[1], axis=1)
    f, jac = ggn.jacobian_op("pyro")(model.spec, params, x_new, curv.layout.names)
    jac = jac.astype(np.float64)
    variance = np.einsum("nop,pq,nrq->nor", jac, np.linalg.inv(h), jac)
    f_mu, f_var = la._glm_predictive_distribution(torch.as_tensor(x_new, dtype=torch.float64))
    np.testing.assert_allclose(f, f_mu.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(variance, f_var.numpy(), rtol=1e-4, atol=1e-8)


def test_regression_net_matches_laplace_torch():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, size=(33, 1))
    model = BNN(x, np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=33), hidden=(5,), noise=0.3)
    _compare(model, "regression", (1, 5, 1), prior_precision=0.7, sigma=0.3)


def test_classification_net_matches_laplace_torch_with_a_precision_per_layer():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 2))
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    model = BNN(x, y, hidden=(4,), likelihood="categorical", num_classes=3)
    _compare(model, "classification", (2, 4, 3), prior_precision=np.array([0.5, 2.0]))


def test_last_layer_of_a_classification_net_matches_laplace_torch():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(37, 2))
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > -0.3).astype(int) + (x[:, 0] > 1).astype(int)
    model = BNN(x, y, hidden=(5, 4), likelihood="categorical", num_classes=4)
    _compare(model, "classification", (2, 5, 4, 4), prior_precision=0.8, structure="last_layer")
