r"""Pyro's ELBO with its likelihood term kept, for training curves (:mod:`ppl_bnn.methods.curves`).

For a guide whose every site is reparameterised (the autoguides' Normal and Delta sites), the
ELBO's surrogate is the ELBO itself,

.. math:: \hat{\mathcal L} = \frac1P \sum_{p=1}^P \big[\log p(y, z_p) - \log q_\phi(z_p)\big],

so one differentiable value gives both the loss and its gradient, as ``Trace_ELBO`` and
``JitTrace_ELBO`` compute them; :class:`LikelihoodTraceELBO` also returns the observed site's
scaled log-likelihood from the same traces.
"""

from __future__ import annotations

import math
from typing import Any

import pyro.ops.jit
import torch
from pyro.infer import Trace_ELBO


class LikelihoodTraceELBO(Trace_ELBO):
    """``Trace_ELBO`` (compiled by ``pyro.ops.jit`` with ``jit=True``, as ``JitTrace_ELBO``) for
    fully reparameterised guides; :attr:`last_log_lik` is the scaled log-likelihood term of the
    last :meth:`loss_and_grads`."""

    def __init__(self, jit: bool, **kwargs: Any) -> None:
        kwargs.pop("ignore_jit_warnings", None)
        super().__init__(**kwargs)
        self.jit = jit
        self.last_log_lik = math.nan
        self._compiled: Any = None

    def _terms(self, model: Any, guide: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
        loss, log_lik = 0.0, 0.0
        for model_trace, guide_trace in self._get_traces(model, guide, args, kwargs):
            elbo = model_trace.log_prob_sum() - guide_trace.log_prob_sum()
            loss = loss - elbo / self.num_particles
            log_lik = log_lik + model_trace.nodes["y"]["log_prob_sum"] / self.num_particles
        return loss, log_lik

    def loss_and_grads(self, model: Any, guide: Any, *args: Any, **kwargs: Any) -> float:
        """The loss (negative ELBO estimate), after its gradients are accumulated."""
        if not self.jit:
            loss, log_lik = self._terms(model, guide, args, kwargs)
        else:
            if self._compiled is None:

                @pyro.ops.jit.trace(ignore_warnings=True)
                def terms(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
                    return self._terms(model, guide, args, kwargs)

                self._compiled = terms
            loss, log_lik = self._compiled(*args, **kwargs)
        loss.backward()
        self.last_log_lik = float(log_lik.detach())
        return float(loss.detach())
