r"""The network linearised around a mode, in JAX: :math:`f(x, \hat\theta) + J(x, \hat\theta)
(\theta_s - \hat\theta)` for every draw :math:`\theta_s`, by ``jax.jvp`` (forward mode, one
Jacobian-vector product per draw, no Jacobian formed) mapped over the draws a few at a time.
The GLM predictive of :mod:`ppl_bnn.predictive`."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from ppl_bnn.backends.numpyro.ops import PPL_NUMPYRO, _as_params
from ppl_bnn.engine.contracts import draws_per_batch
from ppl_bnn.model.program import forward, numberless
from ppl_bnn.model.spec import BNNSpec


@lru_cache(maxsize=32)
def _linearised_fn(spec: BNNSpec, batch: int):
    one_draw = partial(forward, spec, ppl=PPL_NUMPYRO)

    def over_draws(mode, tangents, x):
        def at(params):
            return one_draw(params, x)

        def linearised(tangent):
            f_mode, f_dot = jax.jvp(at, (mode,), (tangent,))
            return f_mode + f_dot

        # Within a batch the draws are vmapped: the mode's forward pass runs once per batch.
        return jax.lax.map(linearised, tangents, batch_size=batch)

    return jax.jit(over_draws)


def forward_linearised(
    spec: BNNSpec, mode: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray], x: np.ndarray
) -> np.ndarray:
    """Outputs (S, N, out) of the network linearised around ``mode`` (weight sites, one draw's
    shape) for draws ``params`` (S, ...); see :class:`~ppl_bnn.engine.contracts.Linearised`."""
    tangents = {
        k: np.asarray(params[k], dtype=np.float32) - np.asarray(v, dtype=np.float32)
        for k, v in mode.items()
    }
    fn = _linearised_fn(numberless(spec), draws_per_batch(spec, x.shape[0]))
    x_arr = jnp.asarray(x, dtype=jnp.float32)
    return np.asarray(fn(_as_params(mode), _as_params(tangents), x_arr))
