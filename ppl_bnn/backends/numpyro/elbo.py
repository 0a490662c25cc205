r"""The ELBO of NumPyro's SVI, traced the same way in every process.

.. math::

    \mathcal L(\phi) = \frac1P \sum_{p=1}^P \big[\log p(y, z_p) - \log q_\phi(z_p)\big],
    \qquad z_p \sim q_\phi

(Wingate & Weber 2013; Ranganath et al. 2014), with the model's log joint and the guide's log
density each summed over sites in trace order. NumPyro's ``Trace_ELBO`` pairs model and guide
terms by iterating a Python ``set`` of site names, whose order follows the per-process string
hash: the same fit then traces to a different program in every process, and JAX's persistent
compilation cache never finds it. Here the order is fixed, so a new process loads the compiled
optimisation instead of compiling it again. Keys are split as ``Trace_ELBO`` splits them (model,
then guide), so the draws are those of ``Trace_ELBO`` up to float rounding.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from numpyro.handlers import replay, seed
from numpyro.infer.elbo import ELBO
from numpyro.infer.util import log_density


class OrderedTraceELBO(ELBO):
    """``Trace_ELBO`` for models and guides without mutable state, summed in trace order."""

    def loss_with_mutable_state(
        self, rng_key: jax.Array, param_map: dict[str, jax.Array], model: Any, guide: Any,
        *args: Any, **kwargs: Any,
    ) -> dict[str, Any]:  # fmt: skip
        """``{"loss": -ELBO estimate, "mutable_state": None}`` (what NumPyro's SVI expects)."""

        def particle(key: jax.Array) -> jax.Array:
            model_key, guide_key = jax.random.split(key)
            log_q, guide_trace = log_density(seed(guide, guide_key), args, kwargs, param_map)
            replayed = replay(seed(model, model_key), guide_trace)
            log_p, _ = log_density(replayed, args, kwargs, param_map)
            return log_p - log_q

        if self.num_particles == 1:
            elbo = particle(rng_key)
        else:
            keys = jax.random.split(rng_key, self.num_particles)
            elbo = jnp.mean(self.vectorize_particles_fn(particle, keys))
        return {"loss": -elbo, "mutable_state": None}
