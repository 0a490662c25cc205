"""The Jacobian of the network outputs with respect to some of its weights, in JAX (one batch).

Reverse mode per example (``jax.jacrev``: one backward pass per output, and outputs are few),
vectorised over the batch with ``jax.vmap`` and compiled once per (spec without its numbers:
:func:`~ppl_bnn.model.program.numberless`, sites, batch size).
The curvature built from it is numpy (:mod:`ppl_bnn.methods.ggn`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ppl_bnn.backends.numpyro.ops import PPL_NUMPYRO
from ppl_bnn.model.flat import sites_layout, split_network
from ppl_bnn.model.program import forward, numberless
from ppl_bnn.model.spec import BNNSpec


@lru_cache(maxsize=32)
def _compiled(spec: BNNSpec, wrt: tuple[str, ...]) -> Any:
    layout = sites_layout(spec, wrt)

    def one(flat: Any, fixed: Mapping[str, Any], x: Any) -> Any:
        params = {**fixed, **layout.unflatten(flat)}
        return forward(spec, params, x[None], PPL_NUMPYRO)[0]

    def batch(flat: Any, fixed: Mapping[str, Any], x: Any) -> tuple[Any, Any]:
        f = jax.vmap(one, in_axes=(None, None, 0))(flat, fixed, x)
        jac = jax.vmap(jax.jacrev(one), in_axes=(None, None, 0))(flat, fixed, x)
        return f, jac

    return jax.jit(batch)


def jacobian(
    spec: BNNSpec, params: Mapping[str, np.ndarray], x: np.ndarray, wrt: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Outputs ``f`` (n, out) and Jacobian :math:`J_{nop} = \\partial f_{no} / \\partial
    \\theta_p` (n, out, P) at one parameter set ``params`` (site -> one draw's value), for the
    sites ``wrt`` laid end to end in that order (:class:`~ppl_bnn.model.flat.FlatLayout`),
    the other network sites held at their values."""
    layout, flat, fixed = split_network(spec, params, wrt)
    fixed = {name: jnp.asarray(value) for name, value in fixed.items()}
    compiled = _compiled(numberless(spec), layout.names)
    f, jac = compiled(jnp.asarray(flat), fixed, jnp.asarray(x, dtype=jnp.float32))
    return np.asarray(f), np.asarray(jac)
