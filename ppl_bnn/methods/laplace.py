"""``laplace``: a Gaussian at the mode whose covariance is the inverse Hessian of
:math:`-\\log p` (MacKay 1992; ``AutoLaplaceApproximation``; see
:mod:`ppl_bnn.methods.optimisation`). Raises :class:`~ppl_bnn.methods.base.HessianError` when the
Hessian at the optimum is not positive definite."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.optimisation import SampledGuideOptions


@dataclass(frozen=True, kw_only=True)
class LaplaceOptions(SampledGuideOptions):
    """Options of ``fit(..., method="laplace")``; ``num_draws`` from the Gaussian at the mode."""

    GUIDE: ClassVar[str] = "AutoLaplaceApproximation"


METHOD = Method(
    name="laplace",
    summary="Gaussian at the mode, inverse-Hessian covariance",
    options=LaplaceOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 300, "learning_rate": 0.05, "num_draws": 5},
    driver="autoguide",
)
