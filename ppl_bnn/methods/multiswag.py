"""MultiSWAG (``multiswag``; Wilson & Izmailov 2020): an ensemble of independent SWAG fits
(:mod:`ppl_bnn.methods.swag`), each from its own MAP start and SGD minibatch stream, their draws
pooled with equal weight (:func:`~ppl_bnn.methods.ensemble.ensemble_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods import swag
from ppl_bnn.methods.base import Family, Method, RunOutput
from ppl_bnn.methods.checks import check_positive_int
from ppl_bnn.methods.ensemble import ensemble_of


@dataclass(frozen=True, kw_only=True)
class MultiSWAGOptions(swag.SWAGOptions):
    """Options of ``fit(..., method="multiswag")``: ``num_members`` SWAG fits (default 5), each
    with the ``swag`` options and ``num_draws`` draws."""

    num_members: int = 5

    @property
    def kept_draws(self) -> int:
        """Draws the result holds: every member's."""
        return self.num_members * super().kept_draws

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("num_members", self.num_members)

    def member_options(self) -> swag.SWAGOptions:
        fields = {k: v for k, v in self.__dict__.items() if k != "num_members"}
        return swag.SWAGOptions(**fields)


def run(name: str, target: Target, options: MultiSWAGOptions, seed: int) -> RunOutput:
    """``num_members`` SWAG fits on the target's backend, their draws pooled in one chain."""
    return ensemble_of(
        swag.METHOD, options.member_options(), options.num_members, name, target, seed
    )


METHOD = Method(
    name="multiswag",
    summary="MultiSWAG: an ensemble of SWAG fits",
    options=MultiSWAGOptions,
    family=Family.ENSEMBLE,
    needs_mode=True,
    smoke={**swag.METHOD.smoke, "num_members": 2},
    run=run,
    requires=("autoguide", "sgmcmc"),
    predicts_near_modes=True,
)
