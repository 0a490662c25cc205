"""What :func:`ppl_bnn.fit` checks before a method runs, in one place: the model, the seed, the
method and its options, a learned or hierarchical prior against the method, the held-out pair,
the memory the fit needs at the least (:mod:`ppl_bnn.methods.memory`), and the warnings a user
should read before a long fit. Nothing here compiles or fits, so a refused fit costs nothing.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppl_bnn.methods import METHODS, get_method, make_options
from ppl_bnn.methods.base import MIN_POINTS_PER_WEIGHT, Method
from ppl_bnn.methods.memory import check_memory
from ppl_bnn.model.bnn import BNN
from ppl_bnn.predictive import weight_sites
from ppl_bnn.seeding import check_seed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitPlan:
    """A fit that passed its checks: the method's entry, its options object, the seed and the
    held-out pair (None without ``validation``)."""

    method: str
    backend: str
    entry: Method
    options: Any
    seed: int
    held_out: tuple[np.ndarray, np.ndarray] | None


def plan_fit(
    model: object,
    method: str,
    backend: str,
    seed: object,
    validation: object,
    options: dict[str, Any],
) -> FitPlan:
    """Check a call of :func:`ppl_bnn.fit` (its errors are listed there) and log the warnings
    it deserves; return what the fit runs with."""
    if not isinstance(model, BNN):
        raise TypeError(f"model must be a ppl_bnn.BNN, got {type(model).__name__}")
    checked_seed = check_seed(seed)
    entry = get_method(method, backend)
    made = make_options(entry, options, backend=backend)
    if model.spec.learned_prior is not None and not entry.learns_hyperparameters:
        learners = ", ".join(m.name for m in METHODS if m.learns_hyperparameters)
        raise ValueError(
            f"a learned prior needs an optimisation method that fits its hyperparameters "
            f"({learners}), not {method!r}: give the prior learned=False for {method}"
        )
    hierarchical = model.spec.hierarchical_prior
    if hierarchical is not None and entry.needs_mode:
        fits = ", ".join(m.name for m in METHODS if not m.needs_mode)
        raise ValueError(
            f"{method!r} is built on a mode of the log joint, and under the hierarchical prior "
            f"{hierarchical!r} it has none (it grows without bound as a scale and the weights "
            f"it scales go to 0 together): fit it by a method that integrates over the scales "
            f"({fits})"
        )
    held_out = None
    if validation is not None:
        if not entry.records_curves:
            recorders = ", ".join(m.name for m in METHODS if m.records_curves)
            raise ValueError(
                f"validation= is read by methods that record training curves ({recorders}), "
                f"not {method!r}"
            )
        held_out = model.held_out(validation, "validation")
    check_memory(method, model.spec, made, len(model.y))
    _warn(model, method, entry, made, options)
    return FitPlan(method, backend, entry, made, checked_seed, held_out)


def _warn(model: BNN, method: str, entry: Method, made: Any, given: dict[str, Any]) -> None:
    """Logged warnings: a mode kept on too few points per weight, and a method whose default
    does not suit every data set run with that default."""
    if entry.predicts_near_modes and made.kept_iterate(model.num_data) != "validation":
        weights = sum(math.prod(shape) for shape in weight_sites(model.spec).values())
        if model.num_data < MIN_POINTS_PER_WEIGHT * weights:
            logger.warning(
                "%s: %d training points for %d weights, fewer than %d per weight: on sets this "
                "small a posterior mode fits the training noise and %s's predictive is likely "
                "over-confident; laplace or mcdropout, or keep='validation' (early stopping), "
                "predict better",
                method, model.num_data, weights, MIN_POINTS_PER_WEIGHT, method,
            )  # fmt: skip
    if entry.tuned_by_default and not set(entry.tuned_by_default) & set(given):
        logger.warning(
            "%s: no %s given; its default does not suit every data set, so choose it on a "
            "validation split (as the suites' '%s (tuned)' contestant does)",
            method, entry.tuned_by_default[0], method,
        )  # fmt: skip
