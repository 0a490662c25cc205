"""A model's log density on one flat unconstrained vector, for drivers that vectorise chains or
fits over that vector (:mod:`~ppl_bnn.backends.numpyro.mclmc`,
:mod:`~ppl_bnn.backends.numpyro.starts`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from ppl_bnn.backends.numpyro import ops
from ppl_bnn.model.program import constrain, site_transforms
from ppl_bnn.model.spec import BNNSpec


class FlatDensity(NamedTuple):
    """The log density on one flat unconstrained vector and how to read that vector."""

    log_density: Callable[..., Any]  # (flat, data) -> log density, with the log-Jacobian
    unravel: Callable[[Any], dict[str, Any]]  # flat -> unconstrained site values
    transforms: dict[str, Any]
    dim: int
    spec: BNNSpec

    def constrained(self, flat: Any) -> dict[str, Any]:
        """Site values (constrained) of one flat unconstrained vector."""
        return constrain(self.transforms, self.unravel(flat))[0]

    def flatten(self, values: dict[str, Any]) -> Any:
        """The flat unconstrained vector of constrained site values."""
        unconstrained = {k: self.transforms[k].inv(jnp.asarray(v)) for k, v in values.items()}
        return ravel_pytree(unconstrained)[0]


def flat_density(spec: BNNSpec) -> FlatDensity:
    r""":math:`\log p(T(z), y \mid x) + \log\lvert\det J_T(z)\rvert` of the flat unconstrained
    :math:`z`, ``T`` the sites' transforms to their supports."""
    transforms = site_transforms(spec, ops.PPL_NUMPYRO)
    log_joint = ops.log_joint(spec)
    zeros = {site.name: jnp.zeros(site.shape, jnp.float32) for site in spec.sites()}
    flat, unravel = ravel_pytree(zeros)

    def log_density(flat: Any, data: tuple[Any, Any]) -> Any:
        theta, log_det = constrain(transforms, unravel(flat))
        return log_joint(theta, *data) + log_det

    return FlatDensity(log_density, unravel, transforms, int(flat.size), spec)
