r"""Posterior predictive distributions from draws of the network weights.

With draws :math:`\theta_s` (s = 1..S) and network outputs :math:`f_s(x)`:

- regression: :math:`p(y \mid x) \approx \frac1S \sum_s \mathcal N(y \mid f_s, \sigma_s^2)`,
  mean :math:`\bar f`, epistemic variance :math:`\operatorname{Var}_s f_s`, total variance
  :math:`\operatorname{Var}_s f_s + \frac1S\sum_s \sigma_s^2`;
- classification: :math:`p(y = k \mid x) \approx \frac1S \sum_s \mathrm{softmax}(f_s)_k`.

The test log predictive density is the log-mean-exp over draws, averaged over points, never clipped.

**Linearised (GLM) predictive.** A result that carries a mode :math:`\hat\theta`
(``linearised_at``, e.g. the MAP of a GGN Laplace fit) predicts with the network linearised
around it, a generalised linear model in the weights,

.. math:: f^{\mathrm{lin}}_s(x) = f(x, \hat\theta) + J(x, \hat\theta)\,(\theta_s - \hat\theta),
          \qquad J(x, \hat\theta) = \partial f(x, \theta) / \partial \theta
          \big|_{\theta = \hat\theta},

in place of :math:`f(x, \theta_s)` for every draw, then as above (Immer, Korzepa & Bauer 2021,
"Improving predictions of Bayesian neural nets via local linearization", AISTATS; Foong et al.
2019). Only the network's weights are linearised: a learned noise precision keeps its value per
draw. Each draw costs one Jacobian-vector product (forward mode, no Jacobian formed), in the
backend's ``linearised`` module (:class:`~ppl_bnn.engine.contracts.Linearised`). A network that
is linear in its weights (no hidden layer) gives the ordinary predictive.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import log_softmax, logsumexp

from ppl_bnn.engine.registry import get_backend, get_module
from ppl_bnn.model.checks import check_targets
from ppl_bnn.model.flat import network_sites
from ppl_bnn.model.program import noise_std
from ppl_bnn.model.spec import PRECISION_SITE, BNNSpec

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
    """Posterior predictive at some inputs."""

    #: The model spec.
    spec: BNNSpec
    #: Network outputs per draw, (S, N, output_dim).
    f: np.ndarray
    #: Gaussian noise std per draw (S,), or None for classification.
    noise_std: np.ndarray | None

    @property
    def is_regression(self) -> bool:
        """Whether the likelihood is Gaussian (else categorical)."""
        return self.spec.likelihood == "gaussian"

    def _regression_only(self, what: str) -> None:
        if not self.is_regression:
            raise ValueError(f"{what} is defined for regression; use probs for classification")

    @property
    def draws(self) -> np.ndarray:
        """Per-draw predictions, ``f`` (S, N) for regression or class probabilities (S, N, K)."""
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
        """Total predictive std (N,), epistemic spread plus observation noise (regression)."""
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
        y_arr = check_targets(
            y, self.f.shape[1], self.spec.likelihood, self.spec.num_classes, name="y"
        )
        ll = log_likelihood_per_draw(self.spec, self.f, self.noise_std, y_arr)
        return logsumexp(ll, axis=0) - np.log(ll.shape[0])

    def mean_log_predictive_density(self, y: object) -> float:
        """The mean of :meth:`log_predictive_density` over the points (the test log-likelihood
        the field reports, in nats per point)."""
        return float(np.mean(self.log_predictive_density(y)))

    def log_likelihood(self, y: object) -> float:
        """Deprecated name of :meth:`mean_log_predictive_density` ("log_likelihood" is the
        pointwise values per draw of :attr:`ppl_bnn.results.FitResult.log_likelihood`)."""
        warnings.warn(
            "Prediction.log_likelihood(y) is now Prediction.mean_log_predictive_density(y); "
            "the old name will be removed",
            FutureWarning,
            stacklevel=2,
        )
        return self.mean_log_predictive_density(y)


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


def weight_sites(spec: BNNSpec) -> dict[str, tuple[int, ...]]:
    """The network's weight sites (every site but the noise precision and a hierarchical
    prior's latent sites) and their shapes."""
    network = network_sites(spec)
    return {site.name: site.shape for site in spec.sites() if site.name in network}


def check_linearised_at(spec: BNNSpec, linearised_at: object) -> dict[str, np.ndarray]:
    """The mode of a linearised predictive: every weight site of ``spec``, one draw's shape,
    finite (a noise precision, if given, is dropped: it is not linearised).

    Raises:
        ValueError: Not a mapping, a weight site missing, a name the spec does not have, or a
            value of the wrong shape or not finite; the message names the site.
    """
    if not isinstance(linearised_at, Mapping):
        raise ValueError(
            f"linearised_at must map site names to arrays, got {type(linearised_at).__name__}"
        )
    sites = weight_sites(spec)
    unknown = sorted(set(map(str, linearised_at)) - set(sites) - {PRECISION_SITE})
    if unknown:
        raise ValueError(
            f"linearised_at names site(s) {', '.join(map(repr, unknown))} that the model does "
            f"not have; its weight sites: {', '.join(sites)}"
        )
    mode: dict[str, np.ndarray] = {}
    for name, shape in sites.items():
        if name not in linearised_at:
            raise ValueError(f"linearised_at lacks the weight site {name!r}")
        try:
            value = np.asarray(linearised_at[name], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"linearised_at[{name!r}] is not an array of numbers") from err
        if value.shape != shape:
            raise ValueError(
                f"linearised_at[{name!r}] has shape {value.shape}, but site {name!r} has shape "
                f"{shape} (one draw, no chain or draw axes)"
            )
        if not np.all(np.isfinite(value)):
            raise ValueError(f"linearised_at[{name!r}] has non-finite values")
        raw = np.asarray(linearised_at[name])  # kept in its own precision where it is float
        mode[name] = raw if np.issubdtype(raw.dtype, np.floating) else value
    return mode


def forward_linearised(
    backend: str,
    spec: BNNSpec,
    mode: Mapping[str, np.ndarray],
    draws: Mapping[str, np.ndarray],
    x: np.ndarray,
) -> np.ndarray:
    """Outputs ``f`` (S, N, out) of the network linearised around ``mode`` (checked by
    :func:`check_linearised_at`) for flat draws (S, ...)."""
    mode = check_linearised_at(spec, mode)
    return get_module(backend, "linearised").forward_linearised(spec, mode, draws, x)


def predictive_at(
    backend: str,
    spec: BNNSpec,
    draws: Mapping[str, np.ndarray],
    x: np.ndarray,
    linearised_at: Mapping[str, np.ndarray] | None = None,
) -> Prediction:
    """The posterior predictive at checked inputs ``x`` from draws shaped (chain, draw, ...);
    with ``linearised_at`` (a mode, site -> one draw's value) the linearised (GLM) predictive
    around it."""
    flat = flatten_draws(draws)
    if linearised_at is None:
        f = forward_draws(backend, spec, flat, x)
    else:
        f = forward_linearised(backend, spec, linearised_at, flat, x)
    return Prediction(spec=spec, f=f, noise_std=noise_std_draws(spec, flat))
