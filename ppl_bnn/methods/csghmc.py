r"""Cyclical SGHMC (``csghmc``; Zhang et al. 2020): the SGHMC update (:mod:`ppl_bnn.methods.sghmc`)
under the cyclical cosine step size of :mod:`ppl_bnn.methods.sgmcmc`; each cycle's exploration
phase is SGD with momentum (no noise), its sampling phase the full update, where draws are kept.
A schedule, not a new driver: it runs on the ``sgmcmc`` drivers of both backends.

Reference: R. Zhang, C. Li, J. Zhang, C. Chen, A. G. Wilson. Cyclical Stochastic Gradient MCMC
for Bayesian Deep Learning. ICLR 2020.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.sghmc import SGHMCOptions
from ppl_bnn.methods.sgmcmc import CyclicalOptions


@dataclass(frozen=True, kw_only=True)
class CSGHMCOptions(CyclicalOptions, SGHMCOptions):
    """Options of ``fit(..., method="csghmc")``: those of SGHMC with the defaults of
    :class:`~ppl_bnn.methods.sgmcmc.CyclicalOptions`: the default peak is half of ``sghmc``'s
    default step (``friction`` times the rate per point, :attr:`SGHMCOptions.step_rate`)."""


METHOD = Method(
    name="csghmc",
    summary="cyclical stochastic-gradient HMC",
    options=CSGHMCOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_samples": 4, "num_cycles": 2, "thinning": 2, "batch_size": 8},
    driver="sgmcmc",
)
