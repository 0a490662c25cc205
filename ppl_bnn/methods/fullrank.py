"""``fullrank``: Gaussian VI with a full covariance (``AutoMultivariateNormal``; small networks;
see :mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.optimisation import GaussianGuideOptions


@dataclass(frozen=True, kw_only=True)
class FullRankOptions(GaussianGuideOptions):
    """Options of ``fit(..., method="fullrank")``."""

    GUIDE: ClassVar[str] = "AutoMultivariateNormal"

    def matrix_floats(self, num_weights: int) -> int:
        """The guide's Cholesky factor: one float per pair of weights."""
        return num_weights * num_weights


METHOD = Method(
    name="fullrank",
    summary="Gaussian VI, full covariance",
    options=FullRankOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 30, "num_draws": 5, "init_map_steps": 20},
    driver="autoguide",
    learns_hyperparameters=True,
)
