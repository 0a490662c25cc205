"""Pyro (torch) backend: the BNN program with ``pyro`` primitives and torch array ops."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import pyro
import pyro.distributions
import torch
from pyro import poutine

from ppl_bnn.backends.pyro import conv, runtime
from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.backends.pyro.rng import pyro_scope
from ppl_bnn.engine.contracts import draws_per_batch
from ppl_bnn.model.dropout import Dropout
from ppl_bnn.model.program import PPL, bnn_model, forward
from ppl_bnn.model.spec import BNNSpec

# A thread count configured before torch was imported, set now that it is.
runtime.apply_pending()

name = "pyro"


def _register_mixture_support() -> None:
    """Teach torch's ``biject_to`` and ``transform_to`` the support of ``MixtureSameFamily`` (its
    components' support, the real line for :class:`~ppl_bnn.model.priors.ScaleMixture`), which
    Pyro's autoguides and samplers map unconstrained values through; NumPyro knows it."""
    from torch.distributions import biject_to, transform_to
    from torch.distributions.constraints import MixtureSameFamilyConstraint

    for registry in (biject_to, transform_to):
        registry.register(MixtureSameFamilyConstraint, partial(_base_transform, registry=registry))


def _base_transform(constraint: Any, registry: Any) -> Any:
    return registry(constraint.base_constraint)


_register_mixture_support()


def _param(name: str, init: float, constraint: Any) -> Any:
    """``pyro.param`` with a number as its initial value (a float32 tensor)."""
    return pyro.param(name, lambda: torch.tensor(init), constraint=constraint)


def _draw(distribution: Any, shape: Any) -> torch.Tensor:
    """A draw of ``shape`` from torch's generator (seeded per fit, ``rng.seeded_torch``), as
    Pyro's own samplers draw; a random op of the trace under ``JitTrace_ELBO``, so every call
    of the compiled ELBO draws afresh."""
    if distribution.has_rsample:
        return distribution.rsample(torch.Size(shape))
    return distribution.sample(torch.Size(shape))


PPL_PYRO = PPL(
    name=name,
    sample=pyro.sample,
    plate=pyro.plate,
    param=_param,
    scale=poutine.scale,
    dist=pyro.distributions,
    biject_to=torch.distributions.biject_to,
    activations={
        "relu": torch.relu,
        "tanh": torch.tanh,
        "gelu": torch.nn.functional.gelu,
        "sigmoid": torch.sigmoid,
    },
    conv2d=conv.conv2d,
    pool=conv.pool,
    draw=_draw,
    factor=pyro.factor,
    stack=lambda values: torch.stack(
        [torch.as_tensor(v, dtype=torch.get_default_dtype()) for v in values]
    ),
)
#: This backend's PPL, as the contract names it (:class:`~ppl_bnn.engine.contracts.Backend`).
ppl = PPL_PYRO


def fit_compilations() -> None:
    """Pyro compiles nothing ahead that a cache could keep: no count."""
    return None


def model(spec: BNNSpec, dropout: Dropout | None = None) -> Any:
    if dropout is None:
        return partial(bnn_model, spec, PPL_PYRO)
    return partial(bnn_model, spec, PPL_PYRO, network=dropout.network(spec, PPL_PYRO))


def data(spec: BNNSpec, x: np.ndarray, y: np.ndarray | None) -> tuple[Any, Any]:
    x_t = torch.as_tensor(np.asarray(x, dtype=np.float32))
    if y is None:
        return x_t, None
    if spec.likelihood == "gaussian":
        return x_t, torch.as_tensor(np.asarray(y, dtype=np.float32))
    return x_t, torch.as_tensor(np.asarray(y, dtype=np.int64))


def _as_params(params: Mapping[str, np.ndarray], requires_grad: bool = False) -> dict:
    return {
        k: torch.tensor(np.asarray(v, dtype=np.float32), requires_grad=requires_grad)
        for k, v in params.items()
    }


def log_joint(spec: BNNSpec) -> Any:
    """Torch function ``(params, x, y, likelihood_scale) -> log joint`` from the Pyro model."""
    program = model(spec)

    def fn(params, x, y, likelihood_scale=1.0):
        conditioned = poutine.condition(program, data=dict(params))
        return poutine.trace(conditioned).get_trace(x, y, likelihood_scale).log_prob_sum()

    return fn


def log_density(
    spec: BNNSpec, x: Any, y: Any, params: Mapping[str, np.ndarray], likelihood_scale: float = 1.0
) -> float:
    # A learned prior's hyperparameters are param sites: their initial values, not whatever a
    # param store outside holds.
    with torch.no_grad(), pyro_scope():
        return float(log_joint(spec)(_as_params(params), x, y, likelihood_scale))


def grad_log_density(
    spec: BNNSpec, x: Any, y: Any, params: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    tensors = _as_params(params, requires_grad=True)
    names = list(tensors)
    with pyro_scope():
        log_p = log_joint(spec)(tensors, x, y)
    grads = torch.autograd.grad(log_p, [tensors[k] for k in names])
    return {k: to_numpy(g) for k, g in zip(names, grads, strict=True)}


def forward_draws(spec: BNNSpec, params: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    x_t = torch.as_tensor(np.asarray(x, dtype=np.float32))
    num = next(iter(params.values())).shape[0]
    batch = draws_per_batch(spec, x_t.shape[0])
    out = np.empty((num, x_t.shape[0], spec.output_dim), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, num, batch):
            part = _as_params({k: v[start : start + batch] for k, v in params.items()})
            out[start : start + batch] = to_numpy(forward(spec, part, x_t, PPL_PYRO))
    return out
