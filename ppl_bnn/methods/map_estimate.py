"""``map``: the posterior mode (``AutoDelta``), the non-Bayesian baseline, kept as one draw
(see :mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.optimisation import OptimisationOptions


@dataclass(frozen=True, kw_only=True)
class MAPOptions(OptimisationOptions):
    """Options of ``fit(..., method="map")``: the point estimate is kept as a single draw."""

    GUIDE: ClassVar[str] = "AutoDelta"


METHOD = Method(
    name="map",
    summary="point estimate at the posterior mode",
    options=MAPOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 30},
    driver="autoguide",
    learns_hyperparameters=True,
)
