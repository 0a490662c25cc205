r"""NumPyro's autoguides, by name, with the full-covariance guide's density made exact.

The ELBO's estimate needs the guide's log density at its own draw :math:`z = \mu + L\varepsilon`.
``AutoMultivariateNormal`` samples :math:`z` from ``MultivariateNormal`` and evaluates its log
density by solving :math:`L^{-1}(z - \mu)` in float32. Once :math:`L` is ill-conditioned the
solve returns rounding noise of any size, and a gradient step that makes it worse lowers the
loss: the optimiser then drives the loss down without bound while the draws' spread blows up
(see docs/defaults.md, "The Gaussian guides").
:class:`AutoMultivariateNormal` here draws :math:`\varepsilon` and transforms it, so that the
density is :math:`\log \mathcal N(\varepsilon; 0, I) - \sum_i \log L_{ii}`, exact whatever the
conditioning (NumPyro keeps :math:`\varepsilon` as the site's intermediate). The guide, its
parameters and its posterior are NumPyro's.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpyro.distributions as dist
from numpyro.distributions.transforms import LowerCholeskyAffine
from numpyro.infer import autoguide


class AutoMultivariateNormal(autoguide.AutoMultivariateNormal):
    """NumPyro's full-covariance guide, its draw's density read from the draw's noise."""

    def _get_posterior(self) -> dist.TransformedDistribution:
        gaussian = super()._get_posterior()
        noise = dist.Normal(jnp.zeros(self.latent_dim), 1.0).to_event(1)
        return dist.TransformedDistribution(
            noise, LowerCholeskyAffine(gaussian.loc, gaussian.scale_tril)
        )


def guide_class(name: str) -> Any:
    """The autoguide class ``name`` (``AutoNormal``, ``AutoMultivariateNormal``, ...)."""
    return AutoMultivariateNormal if name == "AutoMultivariateNormal" else getattr(autoguide, name)
