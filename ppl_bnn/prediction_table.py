"""A posterior predictive as a table: one row per input, the prediction and its uncertainty.

Regression: the predictive mean, the total predictive std (epistemic spread plus noise), and the
central interval of the predictive mixture
:math:`p(y \\mid x) = \\frac1S \\sum_s \\mathcal N(y; f_s(x), \\sigma_s^2)` at ``level``
(its quantiles solved by :func:`ppl_bnn.metrics.regression.mixture_quantiles`).
Classification: the most probable class and every class's predictive probability
:math:`\\frac1S \\sum_s \\mathrm{softmax}(f_s(x))_k`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ppl_bnn.metrics.regression import mixture_quantiles
from ppl_bnn.predictive import Prediction


def prediction_columns(
    target: str, classes: Sequence[str] | None, level: float = 0.95
) -> list[str]:
    """The columns :func:`prediction_table` writes for ``target`` (``classes`` None:
    regression)."""
    if classes is None:
        pct = f"{100 * level:g}"
        return [f"{target}_{part}" for part in ("mean", "std", f"lower_{pct}", f"upper_{pct}")]
    return [f"{target}_predicted", *(f"p({target}={label})" for label in classes)]


def prediction_table(
    pred: Prediction, target: str, classes: Sequence[str] | None = None, level: float = 0.95
) -> pd.DataFrame:
    """One row per input of ``pred``: see the module. ``classes`` names the classes in index
    order (a classification needs them, a regression takes None)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if pred.is_regression != (classes is None):
        kind = "regression" if pred.is_regression else "classification"
        raise ValueError(f"a {kind} predictive was given {'no ' * (classes is None)}classes")
    columns = prediction_columns(target, classes, level)
    if pred.is_regression:
        tail = (1.0 - level) / 2.0
        lower, upper = mixture_quantiles(pred.draws, pred.noise_std, [tail, 1.0 - tail])
        values = np.column_stack([pred.mean, pred.std, lower, upper])
        return pd.DataFrame(values, columns=columns)
    probs = pred.probs
    if probs.shape[1] != len(classes):
        raise ValueError(f"{len(classes)} class names for {probs.shape[1]} classes")
    table = pd.DataFrame(probs, columns=columns[1:])
    table.insert(0, columns[0], np.asarray(classes, dtype=object)[probs.argmax(axis=1)])
    return table
