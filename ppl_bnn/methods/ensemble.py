"""Deep ensembles (``ensemble``; Lakshminarayanan, Pritzel & Blundell 2017).

K independent MAP fits of the same model, each from its own random initialisation and minibatch
stream (child seeds of the fit's seed). The K point estimates are returned as K equally weighted
draws of one chain, so prediction, ArviZ conversion and the metrics treat the ensemble like any
other posterior approximation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppl_bnn.backends.base import Target
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.base import Family, Method, RunOutput
from ppl_bnn.methods.checks import check_positive_int
from ppl_bnn.seeding import child_seed


@dataclass(frozen=True, kw_only=True)
class EnsembleOptions(map_estimate.MAPOptions):
    """Options of ``fit(..., method="ensemble")``: ``num_members`` MAP fits (default 5), each
    with the ``map`` options."""

    num_members: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("num_members", self.num_members)

    def member_options(self) -> map_estimate.MAPOptions:
        fields = {k: v for k, v in self.__dict__.items() if k != "num_members"}
        return map_estimate.MAPOptions(**fields)


def run(name: str, target: Target, options: EnsembleOptions, seed: int) -> RunOutput:
    """K ``map`` fits on the target's backend, their modes as K draws of one chain."""
    run_map = map_estimate.METHOD.runner(target.backend)
    member_options = options.member_options()
    members = [
        run_map(
            map_estimate.METHOD.name, target, member_options, child_seed(seed, f"{name}_member{k}")
        )
        for k in range(options.num_members)
    ]
    draws = {
        site: np.concatenate([m.draws[site] for m in members], axis=1) for site in members[0].draws
    }
    timings = {
        phase: float(sum(m.timings[phase] for m in members))
        for phase in ("compile", "warmup", "sampling")
    }
    info = {**members[0].info, "num_members": options.num_members}
    diverged = [m.info["diverged_at_step"] for m in members if "diverged_at_step" in m.info]
    info.pop("diverged_at_step", None)
    if diverged:
        info["members_diverged"] = len(diverged)
    losses = np.stack([m.losses for m in members])
    return RunOutput(draws=draws, timings=timings, losses=losses, info=info)


METHOD = Method(
    name="ensemble",
    summary="deep ensemble of independent MAP fits",
    options=EnsembleOptions,
    family=Family.ENSEMBLE,
    smoke={"num_steps": 20, "num_members": 2},
    run=run,
)
