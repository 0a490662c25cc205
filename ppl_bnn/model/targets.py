"""What a target array says about its task, for ``BNN`` and for data files alike.

- **The task from the dtype** (:func:`infer_task`): floats are a regression target; integers,
  booleans and strings are class labels. An integer-valued regression target (ratings, counts)
  must be said so (``likelihood="gaussian"``, ``task="regression"``).
- **Labels as class indices** (:func:`sorted_labels`, :func:`label_text`): the distinct labels in
  numeric order where all are numbers, else in string order; class ``k`` is the ``k``-th.
- **A model's targets** (:func:`model_targets`): the likelihood where none is given, labels
  other than integers mapped to indices, and a learned noise by default for regression.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

#: Labels named in a message before "...".
_SHOWN = 3


def infer_task(dtype: Any) -> str:
    """Float target: ``"regression"``; anything else (integers, booleans, strings):
    ``"classification"``."""
    if pd.api.types.is_float_dtype(dtype):
        return "regression"
    return "classification"


def label_text(value: Any) -> str:
    """A class label as a string: integral floats without ``.0`` (so 1 and 1.0 agree)."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, np.floating):
        return repr(float(value))
    return str(value)


def sorted_labels(labels: Sequence[Any]) -> list[str]:
    """Distinct labels as strings, sorted numerically if all are numbers, else as strings."""
    distinct = set(labels)
    if all(isinstance(v, int | float | np.integer | np.floating | np.bool_) for v in distinct):
        return list(dict.fromkeys(label_text(v) for v in sorted(distinct, key=float)))
    return sorted({label_text(v) for v in distinct})


@dataclass(frozen=True)
class ModelTargets:
    """A model's targets as its likelihood reads them.

    Attributes:
        y: The targets: numbers as given, or class indices where the labels were not integers.
        likelihood: ``"gaussian"`` or ``"categorical"``.
        noise: The Gaussian noise (``"learned"`` where none was given); None for classes.
        classes: The label of each class index where the labels were mapped (strings,
            booleans), else None (the labels are the indices).
    """

    y: Any
    likelihood: str
    noise: float | str | None
    classes: tuple[str, ...] | None


def _is_label_dtype(arr: np.ndarray) -> bool:
    return arr.dtype == object or arr.dtype.kind in "USb"


def model_targets(
    y: object, *, likelihood: str | None, noise: object, num_classes: int | None
) -> ModelTargets:
    """``y`` and the likelihood, noise and class labels a model of it takes.

    With ``likelihood`` None: a given ``noise`` means regression, a given ``num_classes``
    classification, otherwise :func:`infer_task` on ``y``'s dtype decides (logged). Labels that
    are strings or booleans become class indices in :func:`sorted_labels` order. A regression
    without ``noise`` learns it. ``ValueError`` for labels given to a Gaussian likelihood, or a
    missing label, naming the fix."""
    arr = np.asarray(y)
    labels = _is_label_dtype(arr)
    if likelihood is None:
        if noise is not None:
            likelihood = "gaussian"
        elif num_classes is not None or labels or infer_task(arr.dtype) == "classification":
            likelihood = "categorical"
            if num_classes is None:
                logger.info(
                    "y holds %s values: the categorical likelihood (pass "
                    'likelihood="gaussian" and a noise for a numeric target)',
                    arr.dtype,
                )
        else:
            likelihood = "gaussian"
    if likelihood == "gaussian":
        if labels and arr.ndim == 1 and arr.size:
            shown = ", ".join(
                repr(v.item() if isinstance(v, np.generic) else v) for v in arr[:_SHOWN]
            )
            raise ValueError(
                f"y holds labels ({shown}, ...), not numbers: for classification leave the "
                'likelihood out (it is inferred) or pass likelihood="categorical"; a numeric '
                "target must be given as numbers"
            )
        return ModelTargets(arr, "gaussian", "learned" if noise is None else noise, None)
    if not labels or arr.ndim != 1:
        return ModelTargets(arr, likelihood, noise, None)
    missing = pd.isna(arr)
    if missing.any():
        rows = ", ".join(str(int(i)) for i in np.flatnonzero(missing)[:_SHOWN])
        raise ValueError(
            f"y has {int(missing.sum())} missing label(s), at index {rows}: drop those rows or "
            "give them a label"
        )
    classes = tuple(sorted_labels(list(arr)))
    return ModelTargets(class_indices(arr, classes), likelihood, noise, classes)


def class_indices(y: object, classes: Sequence[str], *, name: str = "y") -> np.ndarray:
    """Labels ``y`` as int64 indices into ``classes`` (each label compared as its
    :func:`label_text`), e.g. a test set's labels by the training set's classes.

    Raises:
        ValueError: A label that is not among ``classes``, named.
    """
    index = {label: k for k, label in enumerate(classes)}
    texts = [label_text(v) for v in np.asarray(y, dtype=object).ravel()]
    unknown = sorted({t for t in texts if t not in index})
    if unknown:
        shown = ", ".join(map(repr, unknown[:_SHOWN]))
        raise ValueError(
            f"{name} holds labels the model's classes do not: {shown}; its classes: "
            f"{', '.join(map(repr, classes))}"
        )
    return np.array([index[t] for t in texts], dtype=np.int64)
