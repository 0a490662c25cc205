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

:func:`update` takes one step as ``SVI.update`` does and also returns the likelihood term of the
step's estimate (:mod:`ppl_bnn.methods.curves`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from numpyro.handlers import replay, seed
from numpyro.infer import SVI
from numpyro.infer.elbo import ELBO
from numpyro.infer.svi import SVIState
from numpyro.infer.util import log_density


def scaled_log_likelihood(trace: dict[str, Any]) -> jax.Array:
    """The observed site ``y``'s log-likelihood in a model trace, times the site's scale (the
    model's ``likelihood_scale``)."""
    site = trace["y"]
    log_p = site["fn"].log_prob(site["value"]).sum()
    return log_p if site["scale"] is None else site["scale"] * log_p


class OrderedTraceELBO(ELBO):
    """``Trace_ELBO`` for models and guides without mutable state, summed in trace order."""

    def loss_and_log_lik(
        self, rng_key: jax.Array, param_map: dict[str, jax.Array], model: Any, guide: Any,
        *args: Any, **kwargs: Any,
    ) -> tuple[jax.Array, jax.Array]:  # fmt: skip
        """``(-ELBO estimate, its scaled log-likelihood term)``, averaged over particles."""

        def particle(key: jax.Array) -> tuple[jax.Array, jax.Array]:
            model_key, guide_key = jax.random.split(key)
            log_q, guide_trace = log_density(seed(guide, guide_key), args, kwargs, param_map)
            replayed = replay(seed(model, model_key), guide_trace)
            log_p, model_trace = log_density(replayed, args, kwargs, param_map)
            return log_p - log_q, scaled_log_likelihood(model_trace)

        if self.num_particles == 1:
            elbo, log_lik = particle(rng_key)
        else:
            keys = jax.random.split(rng_key, self.num_particles)
            elbos, log_liks = self.vectorize_particles_fn(particle, keys)
            elbo, log_lik = jnp.mean(elbos), jnp.mean(log_liks)
        return -elbo, log_lik

    def loss_with_mutable_state(
        self, rng_key: jax.Array, param_map: dict[str, jax.Array], model: Any, guide: Any,
        *args: Any, **kwargs: Any,
    ) -> dict[str, Any]:  # fmt: skip
        """``{"loss": -ELBO estimate, "mutable_state": None}`` (what NumPyro's SVI expects)."""
        loss, _ = self.loss_and_log_lik(rng_key, param_map, model, guide, *args, **kwargs)
        return {"loss": loss, "mutable_state": None}


def update(
    svi: SVI, state: SVIState, *args: Any, **kwargs: Any
) -> tuple[SVIState, jax.Array, jax.Array]:
    """``(state, loss, log_lik)``: one step of ``svi.update`` (the same keys and Adam update),
    with the scaled log-likelihood term of the loss (an :class:`OrderedTraceELBO`'s)."""
    rng_key, step_key = jax.random.split(state.rng_key)

    def loss_fn(params: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
        params = svi.constrain_fn(params)
        return svi.loss.loss_and_log_lik(step_key, params, svi.model, svi.guide, *args, **kwargs)

    (loss, log_lik), optim_state = svi.optim.eval_and_update(loss_fn, state.optim_state)
    return SVIState(optim_state, None, rng_key), loss, log_lik
