r"""Pyro's autoguides, by name, with the full-covariance guide's density made exact.

The ELBO's estimate needs the guide's log density at its own draw :math:`z = \mu + L\varepsilon`;
``AutoMultivariateNormal`` evaluates it by a float32 triangular solve, which returns rounding
noise of any size once :math:`L` is ill-conditioned (see :mod:`ppl_bnn.backends.numpyro.guides`
for what that did to a fit). :class:`AutoMultivariateNormal` here transforms
:math:`\varepsilon` with a transform that caches it, so that the density is
:math:`\log \mathcal N(\varepsilon; 0, I) - \sum_i \log L_{ii}`, exact whatever the
conditioning. The guide, its parameters and its posterior are Pyro's.
"""

from __future__ import annotations

from typing import Any

import pyro.distributions as dist
import torch
from pyro.distributions.transforms import LowerCholeskyAffine
from pyro.infer import autoguide


class AutoMultivariateNormal(autoguide.AutoMultivariateNormal):
    """Pyro's full-covariance guide, its draw's density read from the draw's noise."""

    def get_posterior(self, *args: Any, **kwargs: Any) -> dist.TransformedDistribution:
        noise = dist.Normal(torch.zeros_like(self.loc), torch.ones_like(self.loc)).to_event(1)
        affine = LowerCholeskyAffine(
            self.loc, scale_tril=self.scale[..., None] * self.scale_tril, cache_size=1
        )
        return dist.TransformedDistribution(noise, [affine])


def guide_class(name: str) -> Any:
    """The autoguide class ``name`` (``AutoNormal``, ``AutoMultivariateNormal``, ...)."""
    return AutoMultivariateNormal if name == "AutoMultivariateNormal" else getattr(autoguide, name)
