"""Deep ensembles (``ensemble``; Lakshminarayanan, Pritzel & Blundell 2017).

K independent MAP fits of the same model, each from its own random initialisation and minibatch
stream (child seeds of the fit's seed). The K point estimates are returned as K equally weighted
draws of one chain, so prediction, ArviZ conversion and the metrics treat the ensemble like any
other posterior approximation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppl_bnn.methods.common import RunOutput, check_positive_int
from ppl_bnn.methods.svi import MAPOptions, _runners
from ppl_bnn.model import BNN
from ppl_bnn.registry import register
from ppl_bnn.seeding import child_seed


@dataclass(frozen=True, kw_only=True)
class EnsembleOptions(MAPOptions):
    """Options of ``fit(..., method="ensemble")``: ``num_members`` MAP fits (default 5), each
    with the ``map`` options."""

    num_members: int = 5

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("num_members", self.num_members)

    def member_options(self) -> MAPOptions:
        fields = {k: v for k, v in self.__dict__.items() if k != "num_members"}
        return MAPOptions(**fields)


def _ensemble_runner(backend: str):
    run_map = _runners("map")[backend]

    def run(model: BNN, options: EnsembleOptions, seed: int) -> RunOutput:
        member_options = options.member_options()
        members = [
            run_map(model, member_options, child_seed(seed, f"ensemble_member{k}"))
            for k in range(options.num_members)
        ]
        draws = {
            name: np.concatenate([m.draws[name] for m in members], axis=1)
            for name in members[0].draws
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

    return run


register("ensemble", EnsembleOptions, {b: _ensemble_runner(b) for b in ("numpyro", "pyro")})
