r"""``map``: a point estimate (``AutoDelta``), the non-Bayesian baseline, kept as one draw (see
:mod:`ppl_bnn.methods.optimisation`): by default early-stopped on a held-out tenth of the
training points (:mod:`ppl_bnn.methods.early_stopping`), else the posterior mode.

It starts where networks are trained from (``init_loc="scaled"``, LeCun et al. 1998: each weight
of a layer with :math:`d_\text{in}` inputs from :math:`\mathcal N(0, 1/d_\text{in})`, biases
0; :mod:`ppl_bnn.methods.initialisation`), as do the methods built on a MAP fit (``ensemble``
members, ``laplace``, ``swag``, ``mcdropout``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ppl_bnn.methods.base import Family, Method
from ppl_bnn.methods.optimisation import OptimisationOptions


@dataclass(frozen=True, kw_only=True)
class MAPOptions(OptimisationOptions):
    """Options of ``fit(..., method="map")``: the point estimate is kept as a single draw.

    Attributes:
        init_loc: Where the optimisation starts: ``"scaled"`` (fan-in-scaled weights, the
            default), ``"uniform"`` (U(-2, 2) in unconstrained space, the libraries' default,
            whose large weights can leave a full-batch fit far from a good mode even on a relu
            layer of 13 inputs, bostonHousing's) or ``"prior"`` (a prior draw).
        keep: Which iterate is kept: ``"validation"``, the parameters that predict a held-out
            tenth of the training points best, at one of 50 checkpoints (early stopping,
            :mod:`ppl_bnn.methods.early_stopping`; trained on the other nine tenths);
            ``"lowest"``, the parameters of lowest loss among those after each step (the
            highest log joint visited: the mode); or ``"last"``, the last step's. ``None``
            (default): ``"validation"`` on :data:`EARLY_STOPPING_MIN_POINTS`
            training points or more, else ``"lowest"`` on the full batch and ``"last"`` with
            ``batch_size`` (a minibatch loss is noisy). A mode with a learned noise fits the
            training noise on small sets, where the lowest loss can predict test data worse
            than a constant (``benchmarks/defaults_audit.py``; docs/defaults.md). Adam at a
            fixed learning rate does not descend monotonically: a late spike in the loss can
            leave the last step's parameters worse than a constant, hence ``"lowest"`` rather
            than ``"last"`` on the full batch. ``info["kept_step"]``: the steps taken before
            the kept parameters.
    """

    init_loc: str = "scaled"
    keep: str | None = None

    GUIDE: ClassVar[str] = "AutoDelta"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.init_loc not in MAP_INIT_LOCS:
            raise ValueError(
                f"unknown init_loc {self.init_loc!r} for a MAP fit; available: "
                f"{', '.join(MAP_INIT_LOCS)}"
            )
        if self.keep is not None and self.keep not in MAP_KEEPS:
            raise ValueError(
                f"unknown keep {self.keep!r} for a MAP fit; available: {', '.join(MAP_KEEPS)}"
            )
        if self.keep == "lowest" and self.batch_size is not None:
            raise ValueError(
                "keep='lowest' needs the full-batch loss: with batch_size set each step's loss "
                "is a minibatch estimate, whose lowest value is noise; give keep='last'"
            )

    def kept_iterate(self, num_data: int) -> str:
        """``keep``, or its default on ``num_data`` training points."""
        if self.keep is not None:
            return self.keep
        if num_data >= EARLY_STOPPING_MIN_POINTS:
            return "validation"
        return "lowest" if self.batch_size is None else "last"


#: Fewest training points for which ``keep=None`` stops early (20 held out). With fewer held
#: out (10 of the gap set's 100 points) the score that chooses the step is mostly noise, and
#: stopping early made tuned MAP predict worse in the gap.
EARLY_STOPPING_MIN_POINTS = 200

#: Where a MAP fit may start (see :mod:`ppl_bnn.methods.initialisation`).
MAP_INIT_LOCS: tuple[str, ...] = ("scaled", "uniform", "prior")

#: Which iterate a MAP fit keeps: the best on held-out data, the one of lowest loss, or the last.
MAP_KEEPS: tuple[str, ...] = ("validation", "lowest", "last")


def map_options_of(options: Any) -> MAPOptions:
    """The ``map`` options among ``options``' fields (those it lacks keep ``map``'s defaults):
    the MAP fit behind a method built on one (``laplace``, ``swag``, ``mcdropout``)."""
    names = {f.name for f in fields(MAPOptions)}
    return MAPOptions(**{k: v for k, v in options.__dict__.items() if k in names})


METHOD = Method(
    name="map",
    summary="point estimate at the posterior mode",
    options=MAPOptions,
    family=Family.OPTIMISATION,
    needs_mode=True,
    smoke={"num_steps": 30},
    driver="autoguide",
    learns_hyperparameters=True,
    predicts_near_modes=True,
    shared=True,  # the point that laplace (same seed and options) starts from
)
