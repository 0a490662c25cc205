"""``lowrank``: Gaussian VI with a low-rank plus diagonal covariance
(``AutoLowRankMultivariateNormal``; see :mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.checks import check_positive_int
from ppl_bnn.methods.optimisation import GaussianGuideOptions


@dataclass(frozen=True, kw_only=True)
class LowRankOptions(GaussianGuideOptions):
    """Options of ``fit(..., method="lowrank")``; ``rank`` of the covariance factor
    (``None``: the libraries' default, about the square root of the number of weights)."""

    GUIDE: ClassVar[str] = "AutoLowRankMultivariateNormal"

    rank: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rank is not None:
            check_positive_int("rank", self.rank)

    def guide_kwargs(self) -> dict[str, Any]:
        return {**super().guide_kwargs(), "rank": self.rank}

    def matrix_floats(self, num_weights: int) -> int:
        """The guide's covariance factor, weights by rank."""
        rank = self.rank if self.rank is not None else max(1, round(math.sqrt(num_weights)))
        return num_weights * rank


METHOD = Method(
    name="lowrank",
    summary="Gaussian VI, low-rank plus diagonal covariance",
    options=LowRankOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 30, "num_draws": 5, "init_map_steps": 20},
    driver="autoguide",
    learns_hyperparameters=True,
)
