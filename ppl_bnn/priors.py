"""Priors on a network's weights and biases and on the noise precision (``BNN(..., prior=...)``,
``noise_prior=...``); see :mod:`ppl_bnn.model.priors` for their definitions.

>>> from ppl_bnn import priors
>>> priors.ScaleMixture(pi=0.2, sigma1=1.0, sigma2=0.1).to_dict()["kind"]
'scale_mixture'
"""

from ppl_bnn.model.priors import (
    PBP_NOISE_PRIOR,
    Gamma,
    HalfCauchy,
    HierarchicalPrior,
    Horseshoe,
    Normal,
    Prior,
    ScaleMixture,
    prior_from_dict,
)

__all__ = [
    "PBP_NOISE_PRIOR",
    "Gamma",
    "HalfCauchy",
    "HierarchicalPrior",
    "Horseshoe",
    "Normal",
    "Prior",
    "ScaleMixture",
    "prior_from_dict",
]
