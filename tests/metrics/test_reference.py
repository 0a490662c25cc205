"""Distances to a reference posterior against hand computations and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ppl_bnn import metrics
from tests.metrics.conftest import MEAN_PROBS


def test_agreement_and_total_variation_by_hand() -> None:
    ref = np.array([[0.4, 0.6], [0.55, 0.45], [0.2, 0.8], [0.75, 0.25]])
    assert metrics.agreement(MEAN_PROBS, ref) == 0.75
    assert metrics.total_variation(MEAN_PROBS, ref) == pytest.approx((0.5 + 0 + 0.1 + 0) / 4)
    out = metrics.reference_metrics_classification(
        np.stack([MEAN_PROBS, MEAN_PROBS]), np.stack([ref, ref, ref])
    )
    assert out == {"ref_agreement": 0.75, "ref_tv": pytest.approx(0.15)}


def test_w2_of_two_gaussians() -> None:
    m1, s1, m2, s2 = 0.5, 1.0, -1.0, 2.0
    f, sigma = np.array([[m1]]), np.array([s1])
    f_ref, sigma_ref = np.array([[m2]]), np.array([s2])
    m = 100
    u = (np.arange(m) + 0.5) / m
    z2 = np.mean(stats.norm.ppf(u) ** 2)
    w2 = metrics.mixture_w2(f, sigma, f_ref, sigma_ref, num_quantiles=m)
    # The midpoint rule at u_i = (i + 1/2)/M: exact for the grid ...
    grid = (m1 - m2) ** 2 + (s1 - s2) ** 2 * z2
    assert w2**2 == pytest.approx(grid, rel=1e-8)
    # ... and within the grid's truncation (1 - z2) of the closed form.
    closed = (m1 - m2) ** 2 + (s1 - s2) ** 2
    assert abs(w2**2 - closed) <= (s1 - s2) ** 2 * (1 - z2) + 1e-8
    assert metrics.mixture_w2(f, sigma, f, sigma) == pytest.approx(0.0, abs=1e-8)


def test_ks_of_two_gaussians() -> None:
    # Equal stds: sup |F - G| = 2 Phi(|m1 - m2| / (2 s)) - 1, at the midpoint.
    f, f_ref, sigma = np.array([[0.0, 1.0]]), np.array([[1.0, 1.0]]), np.array([1.5])
    ks = metrics.mixture_ks(f, sigma, f_ref, sigma)
    expected = (2 * stats.norm.cdf(1.0 / 3.0) - 1) / 2  # second point: identical, KS 0
    assert ks == pytest.approx(expected, abs=1e-4)
    # Unequal stds: against a dense scan of |Phi((t - m1)/s1) - Phi((t - m2)/s2)|.
    t = np.linspace(-10, 10, 200_001)
    scan = np.max(np.abs(stats.norm.cdf(t, 0.0, 1.0) - stats.norm.cdf(t, 0.5, 2.0)))
    ks2 = metrics.mixture_ks(np.array([[0.0]]), np.array([1.0]), np.array([[0.5]]), np.array([2.0]))
    assert ks2 <= scan + 1e-9
    assert ks2 == pytest.approx(scan, abs=1e-4)


def test_reference_metrics_regression_keys() -> None:
    rng = np.random.default_rng(7)
    f, f_ref = rng.normal(size=(5, 4)), rng.normal(size=(9, 4))
    sigma, sigma_ref = np.full(5, 0.7), np.full(9, 0.9)
    out = metrics.reference_metrics_regression(f, sigma, f_ref, sigma_ref)
    assert out == {
        "ref_w2": pytest.approx(metrics.mixture_w2(f, sigma, f_ref, sigma_ref)),
        "ref_ks": pytest.approx(metrics.mixture_ks(f, sigma, f_ref, sigma_ref)),
    }
