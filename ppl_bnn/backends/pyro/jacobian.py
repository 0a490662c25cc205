"""The Jacobian of the network outputs with respect to some of its weights, in torch (one batch).

Reverse mode per example (``torch.func.jacrev``: one backward pass per output, and outputs
are few), vectorised over the batch with ``torch.func.vmap``. The curvature built from it is
numpy (:mod:`ppl_bnn.methods.ggn`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.backends.pyro.ops import PPL_PYRO
from ppl_bnn.model.flat import split_network
from ppl_bnn.model.program import forward
from ppl_bnn.model.spec import BNNSpec


def jacobian(
    spec: BNNSpec, params: Mapping[str, np.ndarray], x: np.ndarray, wrt: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The outputs and their Jacobian with respect to the sites ``wrt``, as NumPyro's
    (:func:`ppl_bnn.backends.numpyro.jacobian.jacobian`), by ``torch.func``."""
    layout, flat, fixed = split_network(spec, params, wrt)
    flat = torch.as_tensor(flat)
    fixed = {name: torch.as_tensor(value) for name, value in fixed.items()}

    def one(theta: Any, x_one: Any) -> Any:
        return forward(spec, {**fixed, **layout.unflatten(theta)}, x_one[None], PPL_PYRO)[0]

    x_t = torch.as_tensor(np.asarray(x, dtype=np.float32))
    with torch.no_grad():
        f = forward(spec, {**fixed, **layout.unflatten(flat)}, x_t, PPL_PYRO)
    jac = torch.func.vmap(torch.func.jacrev(one), in_dims=(None, 0))(flat, x_t)
    return to_numpy(f), to_numpy(jac)
