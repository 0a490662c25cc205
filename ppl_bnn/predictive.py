r"""Posterior predictive distributions from draws of the network weights.

With draws :math:`\theta_s` (s = 1..S) and network outputs :math:`f_s(x)`:

- regression: :math:`p(y \mid x) \approx \frac1S \sum_s \mathcal N(y \mid f_s, \sigma_s^2)`,
  mean :math:`\bar f`, epistemic variance :math:`\operatorname{Var}_s f_s`, total variance
  :math:`\operatorname{Var}_s f_s + \frac1S\sum_s \sigma_s^2`;
- classification: :math:`p(y = k \mid x) \approx \frac1S \sum_s \mathrm{softmax}(f_s)_k`.

The test log predictive density is the log-mean-exp over draws, averaged over points, never clipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import log_softmax, logsumexp

from ppl_bnn.backends import get_backend
from ppl_bnn.model.program import noise_std
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.model.validate import validate_targets

_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def log_likelihood_per_draw(
    spec: BNNSpec, f: np.ndarray, sigma: np.ndarray | None, y: np.ndarray
) -> np.ndarray:
    """``log p(y_n | x_n, theta_s)`` shaped (S, N) from outputs ``f`` (S, N, out) and, for
    regression, the noise std per draw ``sigma`` (S,)."""
    if spec.likelihood == "gaussian":
        sigma = np.asarray(sigma, dtype=np.float64)[:, None]
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

    def log_predictive_density(self, y: object) -> np.ndarray:
        """``log p(y_n | x_n, data)`` per point (N,), by log-mean-exp over draws."""
        y_arr = validate_targets(
            y, self.f.shape[1], self.spec.likelihood, self.spec.num_classes, name="y"
        )
        ll = log_likelihood_per_draw(self.spec, self.f, self.noise_std, y_arr)
        return logsumexp(ll, axis=0) - np.log(ll.shape[0])

    def log_likelihood(self, y: object) -> float:
        """Mean test log predictive density over the points."""
        return float(np.mean(self.log_predictive_density(y)))


def forward_draws(
    backend: str, spec: BNNSpec, draws: Mapping[str, np.ndarray], x: np.ndarray
) -> np.ndarray:
    """Outputs ``f`` (S, N, out) for flat draws (S, ...), vectorised over draws."""
    return get_backend(backend).forward_draws(spec, draws, x)


def noise_std_draws(spec: BNNSpec, draws: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Gaussian noise std per flat draw (S,), or None for classification."""
    if spec.likelihood != "gaussian":
        return None
    num = next(iter(draws.values())).shape[0]
    return np.broadcast_to(np.asarray(noise_std(spec, draws), dtype=np.float64), (num,))


def flatten_draws(draws: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Merge the chain and draw axes: (chain, draw, ...) -> (chain * draw, ...)."""
    return {k: v.reshape((-1, *v.shape[2:])) for k, v in draws.items()}


def predictive_at(
    backend: str, spec: BNNSpec, draws: Mapping[str, np.ndarray], x: np.ndarray
) -> Prediction:
    """The posterior predictive at validated inputs ``x`` from draws shaped (chain, draw, ...)."""
    flat = flatten_draws(draws)
    f = forward_draws(backend, spec, flat, x)
    return Prediction(spec=spec, f=f, noise_std=noise_std_draws(spec, flat))
