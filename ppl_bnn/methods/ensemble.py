"""Deep ensembles (``ensemble``; Lakshminarayanan, Pritzel & Blundell 2017).

K independent MAP fits of the same model, each from its own random initialisation and minibatch
stream (child seeds of the fit's seed). The K point estimates are returned as K equally weighted
draws of one chain, so prediction, ArviZ conversion and the metrics treat the ensemble like any
other posterior approximation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.base import DivergedError, Family, Method, RunOutput
from ppl_bnn.methods.checks import check_positive_int
from ppl_bnn.seeding import child_seed

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class EnsembleOptions(map_estimate.MAPOptions):
    """Options of ``fit(..., method="ensemble")``: ``num_members`` MAP fits (default 5), each
    with the ``map`` options."""

    num_members: int = 5

    @property
    def kept_draws(self) -> int:
        """Draws the result holds: every member's."""
        return self.num_members * super().kept_draws

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("num_members", self.num_members)

    def member_options(self) -> map_estimate.MAPOptions:
        fields = {k: v for k, v in self.__dict__.items() if k != "num_members"}
        return map_estimate.MAPOptions(**fields)


def run(name: str, target: Target, options: EnsembleOptions, seed: int) -> RunOutput:
    """K ``map`` fits on the target's backend, their modes as K draws of one chain (see
    :func:`ensemble_of`)."""
    return ensemble_of(
        map_estimate.METHOD, options.member_options(), options.num_members, name, target, seed
    )


def ensemble_of(
    member: Method, member_options: Any, num_members: int, name: str, target: Target, seed: int
) -> RunOutput:
    """``num_members`` fits of ``member`` on the target's backend, each with its own child
    seed, their draws concatenated along one chain.

    A member that diverges (:class:`~ppl_bnn.methods.base.DivergedError`) is left out: the
    members that stayed finite are returned, marked diverged (``info``: ``diverged_at_step``
    per member, ``members_diverged``); when none did, the ensemble raises.
    """
    run_member = member.run_on(target.backend)
    members: list[RunOutput] = []
    failures: dict[int, DivergedError] = {}
    for k in range(num_members):
        try:
            member_seed = child_seed(seed, f"{name}_member{k}")
            members.append(run_member(member.name, target, member_options, member_seed))
        except DivergedError as err:
            failures[k] = err
    steps = [failures[k].step if k in failures else None for k in range(num_members)]
    if failures:
        first = next(iter(failures.values()))
        sites = sorted({site for err in failures.values() for site in err.sites})
        breakdown = DivergedError(
            f"{name.upper()} diverged in {len(failures)} of its {num_members} members "
            f"(the first: {first})",
            method=name,
            step=steps,
            sites=[s.name for s in target.spec.sites() if s.name in sites],
            cause=first.cause,
        )
        if not members:
            raise breakdown
        logger.warning("%s; keeping the %d members that stayed finite", breakdown, len(members))
    draws = {
        site: np.concatenate([m.draws[site] for m in members], axis=1) for site in members[0].draws
    }
    timings = {
        phase: float(sum(m.timings[phase] for m in members))
        for phase in ("compile", "warmup", "sampling")
    }
    info = {**members[0].info, "num_members": num_members}
    if "learned_prior" in info:  # each member fits its own hyperparameters
        info["learned_prior"] = [m.info["learned_prior"] for m in members]
    if failures:
        info.update(breakdown.details(), members_diverged=len(failures))
    losses = np.stack([m.losses for m in members])
    return RunOutput(draws=draws, timings=timings, losses=losses, info=info)


METHOD = Method(
    name="ensemble",
    summary="deep ensemble of independent MAP fits",
    options=EnsembleOptions,
    family=Family.ENSEMBLE,
    needs_mode=True,
    smoke={"num_steps": 20, "num_members": 2},
    run=run,
    requires=("autoguide",),
    predicts_near_modes=True,
    learns_hyperparameters=True,
)
