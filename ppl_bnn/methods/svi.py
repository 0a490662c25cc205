"""``svi``: mean-field Gaussian variational inference (Blundell et al. 2015), the ``AutoNormal``
guide of both libraries fitted by the reparameterised ELBO (:mod:`ppl_bnn.methods.optimisation`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.optimisation import GaussianGuideOptions


@dataclass(frozen=True, kw_only=True)
class SVIOptions(GaussianGuideOptions):
    """Options of ``fit(..., method="svi")``."""

    GUIDE: ClassVar[str] = "AutoNormal"


METHOD = Method(
    name="svi",
    summary="mean-field Gaussian VI",
    options=SVIOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 30, "num_draws": 5, "init_map_steps": 20},
    driver="autoguide",
)
