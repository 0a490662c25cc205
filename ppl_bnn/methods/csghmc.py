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
    :class:`~ppl_bnn.methods.sgmcmc.CyclicalOptions`, with a step scaled by the friction."""

    @property
    def step_rate(self) -> float:
        r"""The default peak step size per training point: ``friction`` times the cyclical
        rate (:attr:`~ppl_bnn.methods.sgmcmc.CyclicalOptions.step_rate`).

        Each cycle opens with SGD with momentum (no noise), whose steady step is
        :math:`\epsilon / (2 \alpha)` times the gradient against SGLD's :math:`\epsilon / 2`,
        so this rate gives it the step of ``csgld``'s exploration. With a learned noise that
        exploration finds the narrow region of a high noise precision, and the next cycle's
        peak step throws the chain out of it (``benchmarks/defaults_audit.py``): at
        :data:`~ppl_bnn.methods.sgmcmc.STEP_RATE` csghmc diverged at the start of the second
        cycle on bostonHousing, concrete and naval-propulsion-plant; at ``friction *
        STEP_RATE``, at the start of the third on naval (residuals 0.04 of the targets' std),
        on both backends; at this rate nowhere.
        """
        return self.friction * super().step_rate


METHOD = Method(
    name="csghmc",
    summary="cyclical stochastic-gradient HMC",
    options=CSGHMCOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_samples": 4, "num_cycles": 2, "thinning": 2, "batch_size": 8},
    driver="sgmcmc",
)
