"""``hmc``: Hamiltonian Monte Carlo with a fixed trajectory (Neal 2011), each library's own kernel
(see :mod:`ppl_bnn.methods.hamiltonian`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.checks import check_positive_float, check_positive_int
from ppl_bnn.methods.hamiltonian import MCMCOptions


@dataclass(frozen=True, kw_only=True)
class HMCOptions(MCMCOptions):
    """Options of ``fit(..., method="hmc")``.

    Attributes:
        trajectory_length: Integration time per draw (``num_steps = ceil(length / step_size)``).
        num_steps: Fixed leapfrog steps per draw; overrides ``trajectory_length`` when set.
    """

    trajectory_length: float = 2 * math.pi
    num_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_float("trajectory_length", self.trajectory_length)
        if self.num_steps is not None:
            check_positive_int("num_steps", self.num_steps)

    def length(self) -> dict[str, Any]:
        """A fixed ``num_steps`` replaces the trajectory length (both libraries' convention)."""
        if self.num_steps is not None:
            return {"num_steps": self.num_steps, "trajectory_length": None}
        return {"num_steps": None, "trajectory_length": self.trajectory_length}


METHOD = Method(
    name="hmc",
    summary="fixed-trajectory HMC",
    options=HMCOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_warmup": 10, "num_samples": 5, "num_steps": 4},
    driver="hmc",
    exact=True,
)
