r"""Posterior predictive distributions from draws of the network weights.

With draws :math:`\theta_s` (s = 1..S) and network outputs :math:`f_s(x)`:

- regression: :math:`p(y \mid x) \approx \frac1S \sum_s \mathcal N(y \mid f_s, \sigma_s^2)`,
  mean :math:`\bar f`, epistemic variance :math:`\operatorname{Var}_s f_s`, total variance
  :math:`\operatorname{Var}_s f_s + \frac1S\sum_s \sigma_s^2`;
- classification: :math:`p(y = k \mid x) \approx \frac1S \sum_s \mathrm{softmax}(f_s)_k`.

The test log predictive density is the log-mean-exp over draws, averaged over points, never clipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import log_softmax, logsumexp

from ppl_bnn.model import validate_targets
from ppl_bnn.spec import BNNSpec

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def pointwise_log_likelihood(
    spec: BNNSpec, f: np.ndarray, noise_std: np.ndarray | None, y: np.ndarray
) -> np.ndarray:
    """``log p(y_n | x_n, theta_s)`` shaped (S, N) from outputs ``f`` (S, N, out)."""
    if spec.likelihood == "gaussian":
        sigma = np.asarray(noise_std, dtype=np.float64)[:, None]
        z = (y[None, :] - f[..., 0]) / sigma
        return -0.5 * z**2 - np.log(sigma) - _HALF_LOG_2PI
    logp = log_softmax(f.astype(np.float64), axis=-1)
    return np.take_along_axis(logp, y[None, :, None].astype(np.int64), axis=-1)[..., 0]


@dataclass(frozen=True)
class Prediction:
    """Posterior predictive at some inputs.

    Attributes:
        spec: The model spec.
        f: Network outputs per draw, (S, N, output_dim).
        noise_std: Gaussian noise std per draw (S,), or None for classification.
    """

    spec: BNNSpec
    f: np.ndarray
    noise_std: np.ndarray | None

    @property
    def is_regression(self) -> bool:
        return self.spec.likelihood == "gaussian"

    def _regression_only(self, what: str) -> None:
        if not self.is_regression:
            raise ValueError(f"{what} is defined for regression; use probs for classification")

    @property
    def draws(self) -> np.ndarray:
        """Per-draw predictions: f (S, N) for regression, class probabilities (S, N, K)."""
        if self.is_regression:
            return self.f[..., 0]
        return np.exp(log_softmax(self.f.astype(np.float64), axis=-1))

    @property
    def mean(self) -> np.ndarray:
        """Predictive mean (N,) (regression)."""
        self._regression_only("mean")
        return self.f[..., 0].mean(axis=0)

    @property
    def epistemic_std(self) -> np.ndarray:
        """Spread of the network output over draws (N,) (regression)."""
        self._regression_only("epistemic_std")
        return self.f[..., 0].std(axis=0)

    @property
    def std(self) -> np.ndarray:
        """Total predictive std (N,): epistemic spread plus observation noise (regression)."""
        self._regression_only("std")
        noise_var = np.mean(np.asarray(self.noise_std, dtype=np.float64) ** 2)
        return np.sqrt(self.f[..., 0].var(axis=0) + noise_var)

    @property
    def probs(self) -> np.ndarray:
        """Posterior predictive class probabilities (N, K) (classification)."""
        if self.is_regression:
            raise ValueError("probs is defined for classification; use mean/std for regression")
        return self.draws.mean(axis=0)

    def pointwise_log_likelihood(self, y: object) -> np.ndarray:
        """``log p(y_n | x_n, data)`` per point (N,), by log-mean-exp over draws."""
        y_arr = validate_targets(
            y, self.f.shape[1], self.spec.likelihood, self.spec.num_classes, name="y"
        )
        ll = pointwise_log_likelihood(self.spec, self.f, self.noise_std, y_arr)
        return logsumexp(ll, axis=0) - np.log(ll.shape[0])

    def log_likelihood(self, y: object) -> float:
        """Mean test log predictive density over the points."""
        return float(np.mean(self.pointwise_log_likelihood(y)))
