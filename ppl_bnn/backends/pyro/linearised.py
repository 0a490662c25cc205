r"""The network linearised around a mode, in torch: :math:`f(x, \hat\theta) + J(x, \hat\theta)
(\theta_s - \hat\theta)` for every draw :math:`\theta_s`, by ``torch.func.jvp`` (forward mode,
one Jacobian-vector product per draw, no Jacobian formed) under ``torch.func.vmap``, a few draws
at a time. The GLM predictive of :mod:`ppl_bnn.predictive`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import torch
from torch.func import jvp, vmap

from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.backends.pyro.ops import PPL_PYRO, _as_params
from ppl_bnn.engine.contracts import draws_per_batch
from ppl_bnn.model.program import forward
from ppl_bnn.model.spec import BNNSpec


def forward_linearised(
    spec: BNNSpec, mode: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], x: np.ndarray
) -> np.ndarray:
    """Outputs (S, N, out) of the network linearised around ``mode`` (weight sites, one draw's
    shape) for draws ``params`` (S, ...); see :class:`~ppl_bnn.engine.contracts.Linearised`."""
    x_t = torch.as_tensor(np.asarray(x, dtype=np.float32))
    mode_t = _as_params(mode)
    num = next(iter(params.values())).shape[0]
    batch = draws_per_batch(spec, x_t.shape[0])
    out = np.empty((num, x_t.shape[0], spec.output_dim), dtype=np.float32)

    def at(weights):
        return forward(spec, weights, x_t, PPL_PYRO)

    def linearised(tangent):
        f_mode, f_dot = jvp(at, (mode_t,), (tangent,))
        return f_mode + f_dot

    over_draws = vmap(linearised)
    # torch's first forward-mode product loads its decompositions with torch.jit.script, which
    # torch 2.13 deprecates: its warning is torch's own business.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*torch\.jit\.script.*deprecated", category=DeprecationWarning
        )
        for start in range(0, num, batch):
            tangents = {
                k: np.asarray(params[k][start : start + batch], dtype=np.float32)
                - np.asarray(v, dtype=np.float32)
                for k, v in mode.items()
            }
            out[start : start + batch] = to_numpy(over_draws(_as_params(tangents)))
    return out
