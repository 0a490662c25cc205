"""``nuts``: the No-U-Turn sampler (Hoffman & Gelman 2014), each library's own kernel (see
:mod:`ppl_bnn.methods.hamiltonian`)."""

from __future__ import annotations

from dataclasses import dataclass

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.checks import check_positive_int
from ppl_bnn.methods.hamiltonian import MCMCOptions


@dataclass(frozen=True, kw_only=True)
class NUTSOptions(MCMCOptions):
    """Options of ``fit(..., method="nuts")``.

    Attributes:
        max_tree_depth: Caps one draw at ``2**max_tree_depth - 1`` leapfrog steps.
    """

    max_tree_depth: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("max_tree_depth", self.max_tree_depth)


METHOD = Method(
    name="nuts",
    summary="No-U-Turn HMC",
    options=NUTSOptions,
    family=Family.MARKOV_CHAIN,
    smoke={"num_warmup": 10, "num_samples": 5, "max_tree_depth": 4},
    driver="hmc",
    exact=True,
)
