r"""The constant predictor every fit must beat, and the check that says whether one did.

A predictive that scores below a constant fitted to the training targets, on the test set or on
the training set itself, has learned nothing usable from the inputs; reports flag such a fit and
keep it out of every ranking. Where a test set reaches beyond the training inputs, the test check
looks only where they lie (see :func:`ppl_bnn.bench.evaluate.evaluate`).

- Regression: :math:`\mathcal N(\bar y, s^2)` with the training targets' mean and standard
  deviation (``ddof=0``, the maximum-likelihood Gaussian).
- Classification: the training class frequencies with add-one smoothing,
  :math:`p_k = (n_k + 1) / (N + K)`, so that a class absent from training keeps a finite score.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp
from scipy.stats import norm

from ppl_bnn.metrics import checks


def constant_log_likelihood(
    y_train: ArrayLike, y: ArrayLike, *, num_classes: int | None = None
) -> float:
    """Mean log-likelihood of ``y`` under the constant predictor fitted to ``y_train``.

    Args:
        y_train: Training targets (N,): floats, or integer labels when ``num_classes`` is given.
        y: Targets to score (M,), in the same units.
        num_classes: K for classification; None for regression.
    """
    if num_classes is None:
        train = checks.float_array(y_train, "y_train", (1,))
        scored = checks.float_array(y, "y", (1,))
        scale = train.std()
        if not scale > 0:
            raise ValueError("y_train must not be constant: the constant predictor has no spread")
        return float(np.mean(norm.logpdf(scored, loc=train.mean(), scale=scale)))
    k = checks.positive_int(num_classes, "num_classes")
    train_labels = checks.labels(y_train, len(np.asarray(y_train)), k, "y_train")
    labels = checks.labels(y, len(np.asarray(y)), k, "y")
    counts = np.bincount(train_labels, minlength=k)
    log_p = np.log(counts + 1.0) - math.log(len(train_labels) + k)
    return float(np.mean(log_p[labels]))


def mean_log_predictive_density(log_likelihood_per_draw: ArrayLike) -> float:
    r"""Mean over points of :math:`\log \frac1S \sum_s p(y_n \mid \theta_s)` (log-sum-exp).

    Args:
        log_likelihood_per_draw: Per-draw pointwise log-likelihood (..., N); every leading axis
            (chain, draw) counts as draws.

    Returns:
        The mean over points; NaN if any point's value is not finite.
    """
    ll = checks.float_array(log_likelihood_per_draw, "log_likelihood_per_draw", (1, 2, 3))
    per_point = ll.reshape(-1, ll.shape[-1])
    with np.errstate(all="ignore"):
        lpd = logsumexp(per_point, axis=0) - math.log(per_point.shape[0])
    return float(np.mean(lpd)) if np.all(np.isfinite(lpd)) else math.nan


def usability_flags(
    *,
    test_ll: float,
    baseline_test_ll: float,
    train_ll: float,
    baseline_train_ll: float,
    nonfinite_test_points: int = 0,
    num_test_points: int | None = None,
    test_part: str | None = None,
) -> list[str]:
    """Why a fit's predictive is unusable (empty when it is usable).

    Unusable: a test log-likelihood below the constant predictor's, a training log-likelihood
    below the constant's (the fit did not even describe its own data), or a log-likelihood that
    is not finite at some test points (the mean over the rest would flatter it).

    ``test_part`` names the part of the test set that ``test_ll`` and ``baseline_test_ll``
    score (e.g. ``"in range"``), None for the whole set.
    """
    flags = []
    if not np.isfinite(test_ll) or test_ll < baseline_test_ll:
        part = "" if test_part is None else f" ({test_part})"
        flags.append(
            f"test log-likelihood{part} {test_ll:.3g} is below the constant predictor's "
            f"{baseline_test_ll:.3g}"
        )
    if not np.isfinite(train_ll) or train_ll < baseline_train_ll:
        flags.append(
            f"training log-likelihood {train_ll:.3g} is below the constant predictor's "
            f"{baseline_train_ll:.3g}"
        )
    if nonfinite_test_points:
        of = "" if num_test_points is None else f" of {num_test_points}"
        flags.append(f"log-likelihood not finite at {nonfinite_test_points}{of} test points")
    return flags
