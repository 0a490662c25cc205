r"""Cyclical SGLD (``csgld``; Zhang et al. 2020): the SGLD update (:mod:`ppl_bnn.methods.sgld`)
under the cyclical cosine step size of :mod:`ppl_bnn.methods.sgmcmc`, noise-free in each cycle's
exploration phase and keeping draws only in its sampling phase. A schedule, not a new driver: it
runs on the ``sgmcmc`` drivers of both backends.

Reference: R. Zhang, C. Li, J. Zhang, C. Chen, A. G. Wilson. Cyclical Stochastic Gradient MCMC
for Bayesian Deep Learning. ICLR 2020.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.sgld import SGLDOptions
from ppl_bnn.methods.sgmcmc import CyclicalOptions


@dataclass(frozen=True, kw_only=True)
class CSGLDOptions(CyclicalOptions, SGLDOptions):
    """Options of ``fit(..., method="csgld")``: those of SGLD with the defaults of
    :class:`~ppl_bnn.methods.sgmcmc.CyclicalOptions`."""


METHOD = Method(
    name="csgld",
    summary="cyclical stochastic-gradient Langevin dynamics",
    options=CSGLDOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_samples": 4, "num_cycles": 2, "thinning": 2, "batch_size": 8},
    driver="sgmcmc",
)
