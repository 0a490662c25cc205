"""Metrics for posterior predictives: pure numpy/scipy, with ArviZ for R-hat and ESS.

Every function is unit-agnostic: callers convert predictions and targets to the units they report
(original units for regression) before calling. Invalid input raises ``ValueError`` naming the
argument (:mod:`~ppl_bnn.metrics.checks`); non-finite predictions are not an error, and each
function says what it does with them.

- :mod:`~ppl_bnn.metrics.regression`: Gaussian-mixture predictives (RMSE, log-likelihood,
  quantiles, coverage, CRPS);
- :mod:`~ppl_bnn.metrics.classification`: class probabilities (accuracy, NLL, Brier, ECE,
  entropy, AUROC);
- :mod:`~ppl_bnn.metrics.reference`: distances to a reference posterior's predictive;
- :mod:`~ppl_bnn.metrics.diagnostics`: MCMC R-hat, ESS and sampler statistics;
- :mod:`~ppl_bnn.metrics.cost`: effective samples per second and per gradient;
- :mod:`~ppl_bnn.metrics.baseline`: the constant predictor a usable fit must beat.

Every public function of these modules is importable from here.
"""

from __future__ import annotations

from ppl_bnn.metrics.baseline import (
    constant_log_likelihood,
    mean_log_predictive_density,
    usability_flags,
)
from ppl_bnn.metrics.classification import (
    accuracy,
    auroc,
    brier,
    classification_metrics,
    expected_calibration_error,
    nll,
    predictive_entropy,
    refusal_rate,
    refuse_curve,
    reliability_diagram,
    selective_curve,
)
from ppl_bnn.metrics.cost import cost_metrics
from ppl_bnn.metrics.diagnostics import (
    each_chain_diagnostics,
    prediction_diagnostics,
    sampler_diagnostics,
)
from ppl_bnn.metrics.reference import (
    agreement,
    mixture_ks,
    mixture_w2,
    reference_metrics_classification,
    reference_metrics_regression,
    reference_quantiles,
    total_variation,
)
from ppl_bnn.metrics.regression import (
    calibration_curve,
    crps,
    interval_coverage,
    log_predictive_density,
    mixture_cdf,
    mixture_quantiles,
    regression_metrics,
    rmse,
    test_log_likelihood,
)

__all__ = [
    "accuracy",
    "agreement",
    "auroc",
    "brier",
    "calibration_curve",
    "classification_metrics",
    "constant_log_likelihood",
    "cost_metrics",
    "crps",
    "each_chain_diagnostics",
    "expected_calibration_error",
    "interval_coverage",
    "log_predictive_density",
    "mean_log_predictive_density",
    "mixture_cdf",
    "mixture_ks",
    "mixture_quantiles",
    "mixture_w2",
    "nll",
    "prediction_diagnostics",
    "predictive_entropy",
    "reference_metrics_classification",
    "reference_metrics_regression",
    "reference_quantiles",
    "refusal_rate",
    "refuse_curve",
    "regression_metrics",
    "reliability_diagram",
    "rmse",
    "sampler_diagnostics",
    "selective_curve",
    "test_log_likelihood",
    "total_variation",
    "usability_flags",
]
