"""``svi``: mean-field Gaussian variational inference (Blundell et al. 2015), the ``AutoNormal``
guide of both libraries fitted by the reparameterised ELBO (:mod:`ppl_bnn.methods.optimisation`);
with ``estimator="local_reparam"`` or ``"flipout"``, the same guide fitted by the ``meanfield``
driver (:mod:`ppl_bnn.methods.meanfield`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import get_driver
from ppl_bnn.methods.base import Family, Method, RunOutput
from ppl_bnn.methods.checks import check_positive_int
from ppl_bnn.methods.optimisation import GaussianGuideOptions
from ppl_bnn.model.estimators import ESTIMATORS, linear_map


@dataclass(frozen=True, kw_only=True)
class SVIOptions(GaussianGuideOptions):
    """Options of ``fit(..., method="svi")``.

    Attributes:
        curve_every: Steps between the checkpoints of the training curve
            (:mod:`ppl_bnn.methods.curves`: the ELBO split into expected log-likelihood and KL,
            and the held-out log-likelihood when ``fit`` is given ``validation=``), stored in
            ``info["training_curve"]``. ``None`` (default): every ``num_steps // 50`` steps
            when a validation set is given, no curve otherwise; 0: no curve. Each checkpoint
            costs 5 forward passes over at most 500 validation points.
    """

    curve_every: int | None = None

    GUIDE: ClassVar[str] = "AutoNormal"
    ESTIMATORS: ClassVar[tuple[str, ...]] = ESTIMATORS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.curve_every is not None:
            check_positive_int("curve_every", self.curve_every, minimum=0)


def run(name: str, target: Target, options: SVIOptions, seed: int) -> RunOutput:
    """The fit by the driver of ``options.estimator``, on the target's backend, once every layer
    is known to have a rule for that estimator."""
    if options.estimator != "reparam" and target.spec.learned_prior is not None:
        raise ValueError(
            f"estimator {options.estimator!r} does not fit a learned prior's hyperparameters; "
            "use estimator='reparam' or a prior with learned=False"
        )
    for layer, sites in target.spec.layer_params:
        if sites:
            linear_map(layer, options.estimator)
    return get_driver(target.backend, options.driver)(name, target, options, seed)


METHOD = Method(
    name="svi",
    summary="mean-field Gaussian VI",
    options=SVIOptions,
    family=Family.OPTIMISATION,
    smoke={"num_steps": 30, "num_draws": 5, "init_map_steps": 20},
    run=run,
    requires=("autoguide",),
    learns_hyperparameters=True,
    records_curves=True,
)
