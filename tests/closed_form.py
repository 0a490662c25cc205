"""Bayesian linear regression with known noise: the BNN with ``hidden=()`` and its exact posterior.

With inputs X (N, D), design Z = [X, 1], prior theta ~ N(0, s^2 I) and y ~ N(Z theta, sigma^2):
posterior precision L = Z^T Z / sigma^2 + I / s^2, covariance S = L^-1, mean S Z^T y / sigma^2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppl_bnn import BNN


@dataclass(frozen=True)
class LinearProblem:
    model: BNN
    mean: np.ndarray  # (D + 1,) ordered as w0[:, 0] then b0
    cov: np.ndarray  # (D + 1, D + 1)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    @property
    def mean_field_std(self) -> np.ndarray:
        """Std of the KL(q || p)-optimal factorised Gaussian: 1 / sqrt(diag of the precision)."""
        return 1.0 / np.sqrt(np.diag(np.linalg.inv(self.cov)))


def linear_problem(
    correlation: float = 0.0, n: int = 40, seed: int = 3, likelihood_scale: float = 1.0
) -> LinearProblem:
    """Two standardised inputs with the given sample correlation, centred so the bias is
    independent of the weights; ``correlation=0`` makes the exact posterior diagonal.

    ``likelihood_scale`` c gives the posterior of the tempered model p(theta) p(y | theta)^c
    (beta-VI with kl_weight 1 / c targets it).
    """
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, 3)) - rng.normal(size=(n, 3)).mean(axis=0))
    # Two orthonormal directions orthogonal to the constant vector.
    basis = np.linalg.qr(np.column_stack([np.ones(n), q]))[0][:, 1:3]
    u = basis * np.sqrt(n)
    x = np.column_stack([u[:, 0], correlation * u[:, 0] + np.sqrt(1 - correlation**2) * u[:, 1]])
    noise, prior_scale = 1.0, 1.0
    theta = np.array([0.8, -0.5, 0.3])
    z = np.column_stack([x, np.ones(n)])
    y = z @ theta + noise * rng.normal(size=n)
    precision = likelihood_scale * z.T @ z / noise**2 + np.eye(3) / prior_scale**2
    cov = np.linalg.inv(precision)
    mean = likelihood_scale * cov @ z.T @ y / noise**2
    model = BNN(x, y, hidden=(), prior_scale=prior_scale, noise=noise)
    return LinearProblem(model=model, mean=mean, cov=cov)


def flat_draws(draws: dict[str, np.ndarray]) -> np.ndarray:
    """Draws (chain, draw, 3) ordered like :attr:`LinearProblem.mean`."""
    return np.concatenate([draws["w0"][..., 0], draws["b0"]], axis=-1)
