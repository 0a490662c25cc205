"""Metrics against hand computations, closed forms and numerical integrals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from ppl_bnn import metrics

# --- regression: log-likelihood, RMSE -----------------------------------------------------------


def test_rmse_by_hand() -> None:
    # errors 1, -2, 2: sqrt((1 + 4 + 4) / 3)
    assert metrics.rmse([1.0, 0.0, 5.0], [0.0, 2.0, 3.0]) == pytest.approx(math.sqrt(3.0))


def test_pointwise_ll_single_draw_is_gaussian_logpdf() -> None:
    f = np.array([[0.5, -1.0, 2.0]])
    sigma = np.array([0.7])
    y = np.array([0.0, 1.0, 2.5])
    expected = stats.norm.logpdf(y, loc=f[0], scale=0.7)
    np.testing.assert_allclose(metrics.pointwise_log_likelihood(f, sigma, y), expected, rtol=1e-12)


def test_pointwise_ll_mixture_by_hand() -> None:
    f = np.array([[1.0, -1.0], [2.0, 0.0], [4.0, 0.5]])
    sigma = np.array([0.5, 1.0, 2.0])
    y = np.array([1.5, -0.5])
    dens = stats.norm.pdf(y[None, :], loc=f, scale=sigma[:, None]).mean(axis=0)
    np.testing.assert_allclose(
        metrics.pointwise_log_likelihood(f, sigma, y), np.log(dens), rtol=1e-12
    )
    # Per-point sigma (S, N) gives the same result when it repeats the per-draw values.
    sigma_2d = np.repeat(sigma[:, None], 2, axis=1)
    np.testing.assert_allclose(
        metrics.pointwise_log_likelihood(f, sigma_2d, y), np.log(dens), rtol=1e-12
    )


def test_pointwise_ll_is_not_clipped_far_in_the_tail() -> None:
    # 60 stds away the density underflows to 0; log-sum-exp keeps the exact value.
    f = np.array([[0.0], [0.0]])
    sigma = np.array([1.0, 2.0])
    y = np.array([60.0])
    logs = [-0.5 * 60.0**2 - 0.5 * math.log(2 * math.pi), -0.5 * 30.0**2 - math.log(2.0)]
    logs[1] -= 0.5 * math.log(2 * math.pi)
    expected = max(logs) + math.log(sum(math.exp(v - max(logs)) for v in logs)) - math.log(2)
    assert stats.norm.pdf(60.0) == 0.0
    assert metrics.pointwise_log_likelihood(f, sigma, y)[0] == pytest.approx(expected, rel=1e-12)


def test_test_log_likelihood_counts_nonfinite_points() -> None:
    f = np.array([[0.0, np.nan, 1.0], [0.5, 0.0, 1.0]])
    sigma = np.array([1.0, 1.0])
    y = np.array([0.0, 0.0, 1.0])
    pointwise = metrics.pointwise_log_likelihood(f, sigma, y)
    assert np.isnan(pointwise[1])
    mean, bad = metrics.test_log_likelihood(f, sigma, y)
    assert bad == 1
    assert mean == pytest.approx((pointwise[0] + pointwise[2]) / 2)
    all_bad = metrics.test_log_likelihood(np.full((2, 3), np.nan), sigma, y)
    assert math.isnan(all_bad[0]) and all_bad[1] == 3


def test_infinite_draw_output_is_a_valid_mixture_component() -> None:
    # A component at +inf has zero density at y: the log-likelihood is that of the other half.
    f = np.array([[0.0], [np.inf]])
    ll = metrics.pointwise_log_likelihood(f, np.array([1.0, 1.0]), np.array([0.0]))
    assert ll[0] == pytest.approx(stats.norm.logpdf(0.0) - math.log(2))


# --- regression: CDF, quantiles, coverage -------------------------------------------------------


def test_mixture_cdf_by_hand_and_shapes() -> None:
    f = np.array([[0.0, 1.0], [2.0, -1.0]])
    sigma = np.array([1.0, 0.5])
    t = np.array([[0.5, 0.0], [-1.0, 3.0], [2.0, 2.0]])
    expected = 0.5 * (
        stats.norm.cdf(t, loc=f[0], scale=1.0) + stats.norm.cdf(t, loc=f[1], scale=0.5)
    )
    np.testing.assert_allclose(metrics.mixture_cdf(f, sigma, t), expected, rtol=1e-12)
    scalar = metrics.mixture_cdf(f, sigma, 0.5)
    assert scalar.shape == (2,)
    np.testing.assert_allclose(scalar[0], expected[0, 0], rtol=1e-12)


def test_quantiles_of_one_gaussian_match_scipy() -> None:
    f = np.array([[0.0, 3.0, -200.0]])
    sigma = np.array([[1.0, 0.1, 7.0]])
    probs = [1e-10, 0.025, 0.3, 0.5, 0.9, 0.975, 1 - 1e-10]
    q = metrics.mixture_quantiles(f, sigma, probs)
    expected = stats.norm.ppf(np.array(probs)[:, None], loc=f[0], scale=sigma[0])
    assert q.shape == (7, 3)
    np.testing.assert_allclose(q, expected, rtol=1e-8, atol=1e-8 * sigma.max())


def test_quantiles_beyond_the_initial_bracket() -> None:
    # p = 1e-30 is 11.3 stds out, past the bracket min(f - 10 sigma): the bracket must widen.
    q = metrics.mixture_quantiles(np.array([[1.0]]), np.array([2.0]), [1e-30])
    assert q[0, 0] == pytest.approx(stats.norm.ppf(1e-30, loc=1.0, scale=2.0), rel=1e-8)


def test_quantiles_of_mixtures_invert_the_cdf() -> None:
    rng = np.random.default_rng(0)
    f = rng.normal(size=(5, 6))
    f[:2, 3:] += 8.0  # bimodal points
    sigma = rng.uniform(0.2, 1.5, size=(5, 6))
    probs = np.array([0.001, 0.05, 0.25, 0.5, 0.6, 0.95, 0.999])
    q = metrics.mixture_quantiles(f, sigma, probs)
    cdf = metrics.mixture_cdf(f, sigma, q)
    np.testing.assert_allclose(cdf, np.broadcast_to(probs[:, None], q.shape), rtol=1e-8)
    assert np.all(np.diff(q, axis=0) > 0)


def test_quantiles_are_nan_only_where_the_prediction_is() -> None:
    f = np.array([[0.0, np.nan], [1.0, 0.0]])
    q = metrics.mixture_quantiles(f, np.array([1.0, 1.0]), [0.1, 0.9])
    assert np.isnan(q[:, 1]).all()
    assert np.isfinite(q[:, 0]).all()


def test_interval_coverage_on_a_sample_from_the_predictive() -> None:
    rng = np.random.default_rng(1)
    n = 4000
    # Three draws per point; y drawn from the same mixture, so coverage is nominal.
    f = rng.normal(size=(3, n))
    sigma = np.array([0.5, 1.0, 2.0])
    component = rng.integers(0, 3, size=n)
    y = f[component, np.arange(n)] + sigma[component] * rng.normal(size=n)
    levels = (0.5, 0.9, 0.95)
    cov = metrics.interval_coverage(f, sigma, y, levels)
    assert list(cov) == list(levels)
    for level, value in cov.items():
        se = math.sqrt(level * (1 - level) / n)
        assert abs(value - level) < 4 * se


def test_interval_coverage_by_hand() -> None:
    # N(0, 1): the central 50% interval is [-0.674, 0.674].
    f = np.zeros((1, 4))
    y = np.array([0.0, 0.5, 0.7, -3.0])
    cov = metrics.interval_coverage(f, np.array([1.0]), y, levels=(0.5, 0.99))
    assert cov == {0.5: 0.5, 0.99: 0.75}


def test_interval_coverage_counts_targets_between_the_mixture_quantiles() -> None:
    """Coverage from each target's tail probabilities equals counting the targets that fall
    between the solved interval ends; a point with a non-finite draw is never covered."""
    rng = np.random.default_rng(4)
    f = rng.normal(size=(5, 300)) * rng.uniform(0.1, 3.0, size=300)
    f[2, 7] = np.inf
    sigma = rng.uniform(0.2, 1.5, size=(5, 300))
    y = rng.normal(size=300) * 2.0
    levels = (0.2, 0.5, 0.9, 0.99)
    probs = [(1 - lv) / 2 for lv in levels] + [(1 + lv) / 2 for lv in levels]
    q = metrics.mixture_quantiles(f, sigma, probs)
    inside = (y >= q[: len(levels)]) & (y <= q[len(levels) :])
    assert not inside[:, 7].any()
    cov = metrics.interval_coverage(f, sigma, y, levels)
    assert list(cov.values()) == pytest.approx(inside.mean(axis=1).tolist(), abs=0)


def test_calibration_curve_matches_interval_coverage() -> None:
    rng = np.random.default_rng(2)
    f = rng.normal(size=(4, 50))
    sigma = np.full(4, 0.8)
    y = rng.normal(size=50)
    curve = metrics.calibration_curve(f, sigma, y)
    assert curve["nominal"] == pytest.approx(np.linspace(0.05, 0.95, 19).tolist())
    cov = metrics.interval_coverage(f, sigma, y, levels=curve["nominal"])
    assert curve["empirical"] == list(cov.values())


# --- regression: CRPS ---------------------------------------------------------------------------


def test_crps_of_one_gaussian_matches_closed_form() -> None:
    mu, sd = np.array([0.0, 1.0, -2.0]), np.array([1.0, 0.5, 3.0])
    y = np.array([0.3, -1.0, 4.0])
    z = (y - mu) / sd
    per_point = sd * (
        z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / math.sqrt(math.pi)
    )
    value = metrics.crps(mu[None, :], sd[None, :], y)
    assert value == pytest.approx(per_point.mean(), rel=1e-12)


def _crps_by_quadrature(f: np.ndarray, sigma: np.ndarray, y: float) -> float:
    """Integral of (F(t) - 1[t >= y])^2 over t, split at y."""

    def integrand(t: float) -> float:
        cdf = float(np.mean(stats.norm.cdf(t, loc=f, scale=sigma)))
        return (cdf - float(t >= y)) ** 2

    lo = min(y, float(np.min(f - 12 * sigma)))
    hi = max(y, float(np.max(f + 12 * sigma)))
    left = integrate.quad(integrand, lo, y, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
    right = integrate.quad(integrand, y, hi, epsabs=1e-13, epsrel=1e-12, limit=200)[0]
    return left + right


def test_crps_of_a_mixture_matches_the_integral_definition() -> None:
    rng = np.random.default_rng(3)
    f = rng.normal(size=(6, 3))
    f[:3, 2] += 5.0
    sigma = rng.uniform(0.3, 1.5, size=(6, 3))
    y = np.array([0.2, -2.5, 3.0])
    expected = np.mean([_crps_by_quadrature(f[:, n], sigma[:, n], y[n]) for n in range(3)])
    assert metrics.crps(f, sigma, y) == pytest.approx(expected, rel=1e-8)


def test_crps_with_many_draws_uses_256_for_the_pairwise_term() -> None:
    rng = np.random.default_rng(4)
    f = rng.normal(size=(300, 2))
    sigma = rng.uniform(0.5, 1.0, size=300)
    y = np.array([0.1, -0.4])
    sub = np.round(np.linspace(0, 299, 256)).astype(int)

    def abs_moment(m: np.ndarray, sd: np.ndarray) -> np.ndarray:
        return sd * math.sqrt(2 / math.pi) * np.exp(-(m**2) / (2 * sd**2)) + m * (
            1 - 2 * stats.norm.cdf(-m / sd)
        )

    first = abs_moment(y - f, sigma[:, None]).mean(axis=0)
    fs, ss = f[sub], sigma[sub]
    pair = abs_moment(
        fs[:, None, :] - fs[None, :, :], np.sqrt(ss[:, None] ** 2 + ss[None, :] ** 2)[..., None]
    ).mean(axis=(0, 1))
    assert metrics.crps(f, sigma, y) == pytest.approx(np.mean(first - 0.5 * pair), rel=1e-10)


# --- regression: summary dict -------------------------------------------------------------------


def test_regression_metrics_keys_and_values() -> None:
    rng = np.random.default_rng(5)
    f = rng.normal(size=(8, 20))
    sigma = rng.uniform(0.5, 1.5, size=8)
    y = rng.normal(size=20)
    out = metrics.regression_metrics(f, sigma, y)
    assert list(out) == [
        "rmse",
        "test_ll",
        "n_nonfinite_ll",
        "coverage_50",
        "coverage_90",
        "coverage_95",
        "crps",
        "epistemic_std",
        "total_std",
        "mean_interval_width_95",
    ]
    assert out["rmse"] == pytest.approx(metrics.rmse(f.mean(axis=0), y))
    assert (out["test_ll"], out["n_nonfinite_ll"]) == metrics.test_log_likelihood(f, sigma, y)
    cov = metrics.interval_coverage(f, sigma, y)
    assert [out["coverage_50"], out["coverage_90"], out["coverage_95"]] == list(cov.values())
    assert out["crps"] == pytest.approx(metrics.crps(f, sigma, y), rel=1e-12)
    assert out["epistemic_std"] == pytest.approx(np.mean(np.std(f, axis=0)))
    total = np.sqrt(np.var(f, axis=0) + np.mean(sigma**2))
    assert out["total_std"] == pytest.approx(np.mean(total))
    q = metrics.mixture_quantiles(f, sigma, [0.025, 0.975])
    assert out["mean_interval_width_95"] == pytest.approx(np.mean(q[1] - q[0]), rel=1e-8)


def test_regression_metrics_custom_levels_and_nonfinite_draws() -> None:
    f = np.array([[0.0, np.nan, 1.0], [0.5, 0.0, 1.0]])
    out = metrics.regression_metrics(f, np.array([1.0, 1.0]), [0.0, 0.0, 1.0], levels=(0.8,))
    assert "coverage_80" in out and "coverage_95" not in out
    assert out["n_nonfinite_ll"] == 1
    assert math.isfinite(out["test_ll"])
    # The point with a NaN draw has no interval and counts as not covered.
    assert out["coverage_80"] == pytest.approx(2 / 3)


# --- classification -----------------------------------------------------------------------------

# Confidences 0.9, 0.55, 0.7, 0.75; predictions 0, 0, 1, 0; correct: yes, no, yes, yes.
MEAN_PROBS = np.array([[0.9, 0.1], [0.55, 0.45], [0.3, 0.7], [0.75, 0.25]])
LABELS = np.array([0, 1, 1, 0])


def test_accuracy_and_brier_by_hand() -> None:
    assert metrics.accuracy(MEAN_PROBS, LABELS) == 0.75
    # per point: 2 * 0.1^2, 2 * 0.55^2, 2 * 0.3^2, 2 * 0.25^2
    assert metrics.brier(MEAN_PROBS, LABELS) == pytest.approx((0.02 + 0.605 + 0.18 + 0.125) / 4)


def test_ece_and_reliability_diagram_by_hand() -> None:
    # 5 bins: (0.4, 0.6] {0.55 wrong}, (0.6, 0.8] {0.7, 0.75 right}, (0.8, 1] {0.9 right}.
    expected = (abs(0 - 0.55) + 2 * abs(1 - 0.725) + abs(1 - 0.9)) / 4
    assert metrics.expected_calibration_error(MEAN_PROBS, LABELS, num_bins=5) == pytest.approx(
        expected
    )
    diagram = metrics.reliability_diagram(MEAN_PROBS, LABELS, num_bins=5)
    assert diagram["count"] == [0, 0, 1, 2, 1]
    assert diagram["bin_lower"] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])
    assert diagram["bin_upper"] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(diagram["confidence"], [np.nan, np.nan, 0.55, 0.725, 0.9])
    np.testing.assert_allclose(diagram["accuracy"], [np.nan, np.nan, 0.0, 1.0, 1.0])
    # One bin: |mean accuracy - mean confidence| = |0.75 - 0.725|.
    assert metrics.expected_calibration_error(MEAN_PROBS, LABELS, num_bins=1) == pytest.approx(
        0.025
    )
    # Default 15 bins: every confidence alone in its bin.
    assert metrics.expected_calibration_error(MEAN_PROBS, LABELS) == pytest.approx(
        (0.1 + 0.55 + 0.3 + 0.25) / 4
    )


def test_ece_bins_are_closed_on_the_right() -> None:
    # Confidence 0.5 with 2 bins falls in (0, 0.5], as in Guo et al. (2017).
    diagram = metrics.reliability_diagram(np.array([[0.5, 0.5]]), np.array([0]), num_bins=2)
    assert diagram["count"] == [1, 0]


def test_nll_by_hand_and_zero_probability() -> None:
    probs = np.array(
        [
            [[0.2, 0.8], [0.5, 0.5], [1.0, 0.0]],
            [[0.6, 0.4], [0.0, 1.0], [1.0, 0.0]],
        ]
    )
    y = np.array([1, 0, 1])
    # point 0: mean(0.8, 0.4); point 1: mean(0.5, 0) -- finite; point 2: probability 0 -> inf
    expected = (-math.log(0.6) - math.log(0.25)) / 2
    assert metrics.nll(probs, y) == pytest.approx(expected)
    out = metrics.classification_metrics(probs, y)
    assert out["nll"] == pytest.approx(expected)
    assert out["n_nonfinite_nll"] == 1


def test_nll_of_tiny_probabilities_is_not_floored() -> None:
    probs = np.array([[[1 - 1e-300, 1e-300]], [[1 - 1e-310, 1e-310]]])
    expected = -math.log((1e-300 + 1e-310) / 2)
    assert metrics.nll(probs, np.array([1])) == pytest.approx(expected)


def test_predictive_entropy_by_hand() -> None:
    probs = np.array([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.25]])
    expected = [0.0, math.log(3), 0.5 * math.log(2) + 0.5 * math.log(4)]
    np.testing.assert_allclose(metrics.predictive_entropy(probs), expected, atol=1e-15)


def test_auroc_extremes_and_ties() -> None:
    assert metrics.auroc([0.1, 0.2], [0.3, 0.4, 0.5]) == 1.0
    assert metrics.auroc([0.3, 0.4, 0.5], [0.1, 0.2]) == 0.0
    assert metrics.auroc([1.0, 1.0], [1.0, 1.0, 1.0]) == 0.5
    # one tie among 2 x 2 pairs: (3 + 0.5) / 4
    assert metrics.auroc([0.0, 1.0], [1.0, 2.0]) == 0.875
    assert math.isnan(metrics.auroc([0.0, np.nan], [1.0]))


def test_auroc_matches_pairwise_count() -> None:
    rng = np.random.default_rng(6)
    neg = rng.integers(0, 6, size=40).astype(float)  # many ties
    pos = rng.integers(2, 8, size=30).astype(float)
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    expected = (greater + 0.5 * ties) / (pos.size * neg.size)
    assert metrics.auroc(neg, pos) == pytest.approx(expected, rel=1e-12)


def test_refuse_curve_by_hand() -> None:
    curve = metrics.refuse_curve(MEAN_PROBS, LABELS, thresholds=[0.0, 0.6, 0.8, 0.95])
    assert curve["threshold"] == [0.0, 0.6, 0.8, 0.95]
    assert curve["fraction_kept"] == [1.0, 0.75, 0.25, 0.0]
    np.testing.assert_allclose(curve["accuracy"], [0.75, 1.0, 1.0, np.nan])
    default = metrics.refuse_curve(MEAN_PROBS, LABELS)
    assert len(default["threshold"]) == 21


def test_classification_metrics_with_ood() -> None:
    probs = np.stack([MEAN_PROBS, MEAN_PROBS])
    ood = np.full((2, 3, 2), 0.5)  # uniform: maximal entropy, above every in-distribution point
    out = metrics.classification_metrics(probs, LABELS, ood_probs_draws=ood, num_bins=5)
    assert list(out) == [
        "accuracy",
        "nll",
        "n_nonfinite_nll",
        "brier",
        "ece",
        "mean_entropy",
        "ood_auroc",
        "ood_mean_entropy",
    ]
    assert out["accuracy"] == 0.75
    assert out["brier"] == pytest.approx(metrics.brier(MEAN_PROBS, LABELS))
    assert out["ece"] == pytest.approx(metrics.expected_calibration_error(MEAN_PROBS, LABELS, 5))
    assert out["mean_entropy"] == pytest.approx(metrics.predictive_entropy(MEAN_PROBS).mean())
    assert out["ood_auroc"] == 1.0
    assert out["ood_mean_entropy"] == pytest.approx(math.log(2))
    assert "ood_auroc" not in metrics.classification_metrics(probs, LABELS)


def test_nonfinite_probabilities_are_counted_not_rejected() -> None:
    probs = MEAN_PROBS.copy()
    probs[0] = np.nan  # a correct prediction before
    # No prediction for the NaN row: wrong, never kept, disagreeing.
    assert metrics.accuracy(probs, LABELS) == 0.5
    assert metrics.refuse_curve(probs, LABELS, thresholds=[0.0])["fraction_kept"] == [0.75]
    assert metrics.agreement(probs, probs) == 0.75
    assert math.isnan(metrics.expected_calibration_error(probs, LABELS))
    assert sum(metrics.reliability_diagram(probs, LABELS)["count"]) == 3


# --- against a reference posterior --------------------------------------------------------------


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


# --- MCMC diagnostics and cost ------------------------------------------------------------------


def test_rhat_of_iid_and_shifted_chains() -> None:
    rng = np.random.default_rng(8)
    iid = rng.normal(size=(4, 200, 6))
    out = metrics.prediction_diagnostics(iid)
    assert set(out) == {
        "rhat_max",
        "rhat_median",
        "ess_bulk_min",
        "ess_bulk_median",
        "ess_tail_min",
    }
    assert 0.99 < out["rhat_median"] <= out["rhat_max"] < 1.05
    assert out["ess_bulk_min"] > 300  # of 800 independent draws
    shifted = iid + np.array([0.0, 0.0, 2.0, 2.0])[:, None, None]
    assert metrics.prediction_diagnostics(shifted)["rhat_max"] > 1.1


def test_rhat_of_one_chain_compares_its_halves() -> None:
    rng = np.random.default_rng(9)
    chain = rng.normal(size=(1, 400, 3))
    assert metrics.prediction_diagnostics(chain)["rhat_max"] < 1.05
    drifting = chain + np.repeat([0.0, 2.0], 200)[None, :, None]
    assert metrics.prediction_diagnostics(drifting)["rhat_median"] > 1.1


def test_prediction_diagnostics_nonfinite_constant_and_subsampled_points() -> None:
    rng = np.random.default_rng(10)
    draws = rng.normal(size=(2, 50, 3))
    draws[:, :, 1] = 0.25  # constant: R-hat undefined, left out
    draws[0, 7, 2] = np.nan  # not a usable sample: R-hat inf
    out = metrics.prediction_diagnostics(draws)
    assert out["rhat_max"] == math.inf
    assert math.isfinite(out["ess_bulk_min"])
    # 600 points: the 500 evenly spaced ones are used, so a bad point between them is not seen.
    wide = rng.normal(size=(2, 50, 600))
    used = set(np.round(np.linspace(0, 599, 500)).astype(int).tolist())
    hidden = min(set(range(600)) - used)
    wide[0, :, hidden] += 10.0
    assert metrics.prediction_diagnostics(wide)["rhat_max"] < 1.2


def test_sampler_diagnostics_by_hand() -> None:
    stats_ = {
        "diverging": np.array([[False, True, False, False], [False, False, False, True]]),
        "tree_depth": np.array([[3, 10, 10, 2], [10, 4, 5, 6]]),
        # chain 0: diffs 1, 1, 1 -> 3 over deviations 2.25 + 0.25 + 0.25 + 2.25 = 5
        # chain 1: diffs 2, -2, 2 -> 12 over 4 * 1 = 4
        "energy": np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 0.0, 2.0]]),
        "acceptance_rate": np.array([[0.5, 1.0, 0.9, 0.8], [0.7, 0.6, 0.9, 1.0]]),
        "n_steps": np.array([[7, 1023, 1023, 3], [1023, 15, 31, 63]]),
    }
    out = metrics.sampler_diagnostics(stats_, max_tree_depth=10)
    assert out == {
        "divergences": 2.0,
        "divergence_rate": 0.25,
        "max_tree_depth_share": 3 / 8,
        "ebfmi_min": pytest.approx(0.6),
        "mean_acceptance": pytest.approx(0.8),
        "num_grads": 3188.0,
    }
    assert "max_tree_depth_share" not in metrics.sampler_diagnostics(stats_)
    assert metrics.sampler_diagnostics({}) == {}
    assert metrics.sampler_diagnostics({}, max_tree_depth=10) == {}


def test_cost_metrics() -> None:
    assert metrics.cost_metrics(seconds=4.0, ess=200.0, num_grads=8000.0) == {
        "ess_per_s": 50.0,
        "ess_per_1000_grads": 25.0,
        "s_per_grad": 0.0005,
    }
    assert metrics.cost_metrics(seconds=4.0) == {}
    assert metrics.cost_metrics(seconds=0.0, ess=10.0, num_grads=100.0) == {
        "ess_per_1000_grads": 100.0
    }
    assert metrics.cost_metrics(seconds=2.0, ess=10.0, num_grads=0) == {"ess_per_s": 5.0}


# --- validation ---------------------------------------------------------------------------------

F = np.zeros((2, 3))
SIG = np.ones(2)
Y = np.zeros(3)
P3 = np.full((2, 3, 2), 0.5)
P2 = np.full((3, 2), 0.5)
YC = np.array([0, 1, 0])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: metrics.rmse([0.0, 1.0], [0.0]), "y must have length 2"),
        (lambda: metrics.rmse([[0.0]], [0.0]), "mean must be 1-D"),
        (lambda: metrics.pointwise_log_likelihood(np.zeros(3), SIG, Y), "f must be 2-D"),
        (lambda: metrics.pointwise_log_likelihood(F, np.ones(3), Y), r"sigma must have shape"),
        (lambda: metrics.pointwise_log_likelihood(F, np.ones((2, 2)), Y), r"sigma must have"),
        (lambda: metrics.pointwise_log_likelihood(F, np.array([1.0, 0.0]), Y), "sigma must be > 0"),
        (lambda: metrics.pointwise_log_likelihood(F, -SIG, Y), "sigma must be > 0"),
        (lambda: metrics.test_log_likelihood(F, SIG, np.zeros(4)), "y must have length 3"),
        (lambda: metrics.test_log_likelihood(F, SIG, [0.0, np.nan, 0.0]), "y contains NaN"),
        (lambda: metrics.crps(F, SIG, [0.0, np.inf, 0.0]), "y contains inf"),
        (lambda: metrics.crps(np.zeros((2, 0)), SIG, []), "f must not be empty"),
        (lambda: metrics.mixture_cdf(F, SIG, np.zeros(4)), "t must have last axis"),
        (lambda: metrics.mixture_quantiles(F, SIG, [0.0, 0.5]), r"probs must be in \(0, 1\)"),
        (lambda: metrics.mixture_quantiles(F, SIG, [1.0]), r"probs must be in \(0, 1\)"),
        (lambda: metrics.interval_coverage(F, SIG, Y, levels=(0.5, 1.2)), "levels must be in"),
        (lambda: metrics.interval_coverage(F, SIG, Y, levels=(np.nan,)), "levels must be in"),
        (lambda: metrics.regression_metrics(F, SIG, Y, levels=(0.9, 0.901)), "distinct"),
        (lambda: metrics.regression_metrics(F, SIG, Y, levels=(0.0,)), "levels must be in"),
        (lambda: metrics.calibration_curve(F, SIG, Y, levels=[]), "levels must not be empty"),
        (lambda: metrics.accuracy(P2[:2], YC), "y must have length 2"),
        (lambda: metrics.accuracy(P2, [0, 1, 2]), r"class labels in \[0, 2\)"),
        (lambda: metrics.accuracy(P2, [0, -1, 0]), r"class labels in \[0, 2\)"),
        (lambda: metrics.accuracy(P2, [0.0, np.nan, 0.0]), "y contains NaN"),
        (lambda: metrics.accuracy(P2, [0.0, 0.5, 0.0]), "y must be integer class labels"),
        (lambda: metrics.accuracy(P2, ["a", "b", "c"]), "y must be integer class labels"),
        (lambda: metrics.accuracy(P3, YC), "mean_probs must be 2-D"),
        (lambda: metrics.brier(np.array([[1.2, -0.2]] * 3), YC), r"must lie in \[0, 1\]"),
        (lambda: metrics.brier(np.array([[0.5, 0.49]] * 3), YC), "must sum to 1"),
        (lambda: metrics.nll(P2, YC), "probs_draws must be 3-D"),
        (lambda: metrics.nll(P3, [0, 1]), "y must have length 3"),
        (lambda: metrics.nll(P3 * 1.1, YC), r"probs_draws must lie in \[0, 1\]|must sum to 1"),
        (lambda: metrics.expected_calibration_error(P2, YC, num_bins=0), "num_bins must be"),
        (lambda: metrics.reliability_diagram(P2, YC, num_bins=2.5), "num_bins must be"),
        (lambda: metrics.classification_metrics(P3, YC, num_bins=True), "num_bins must be"),
        (
            lambda: metrics.classification_metrics(
                P3, YC, ood_probs_draws=np.full((2, 3, 3), 1 / 3)
            ),
            "ood_probs_draws must have 2 classes",
        ),
        (lambda: metrics.predictive_entropy(np.array([[0.7, 0.7]])), "must sum to 1"),
        (lambda: metrics.auroc([], [1.0]), "scores_negative must not be empty"),
        (lambda: metrics.auroc([0.0], [[1.0]]), "scores_positive must be 1-D"),
        (lambda: metrics.refuse_curve(P2, YC, thresholds=[0.5, 1.5]), r"thresholds must be in"),
        (lambda: metrics.agreement(P2, P2[:2]), "must have the same shape"),
        (lambda: metrics.total_variation(P2, np.full((3, 3), 1 / 3)), "must have the same shape"),
        (
            lambda: metrics.reference_metrics_classification(P3, np.full((2, 4, 2), 0.5)),
            "must agree in points and classes",
        ),
        (lambda: metrics.mixture_w2(F, SIG, np.zeros((2, 4)), SIG), "same number of points"),
        (lambda: metrics.mixture_ks(F, SIG, F, np.zeros(2)), "sigma_ref must be > 0"),
        (lambda: metrics.mixture_w2(F, SIG, F, SIG, num_quantiles=0), "num_quantiles must be"),
        (lambda: metrics.reference_metrics_regression(F, SIG, F[:, :2], SIG), "same number"),
        (lambda: metrics.prediction_diagnostics(np.zeros((4, 10))), "draws must be 3-D"),
        (lambda: metrics.prediction_diagnostics(np.zeros((2, 3, 4))), "at least 4 draws"),
        (lambda: metrics.prediction_diagnostics(np.zeros((1, 7, 4))), "at least 8 draws"),
        (
            lambda: metrics.sampler_diagnostics({"diverging": np.zeros(5)}),
            r"sample_stats\['diverging'\] must be 2-D",
        ),
        (
            lambda: metrics.sampler_diagnostics({"energy": np.zeros((2, 1))}),
            "at least 2 draws",
        ),
        (
            lambda: metrics.sampler_diagnostics({}, max_tree_depth=0),
            "max_tree_depth must be an integer",
        ),
        (lambda: metrics.cost_metrics(seconds=-1.0), "seconds must be finite and >= 0"),
        (lambda: metrics.cost_metrics(seconds=math.inf), "seconds must be finite"),
        (lambda: metrics.cost_metrics(seconds=1.0, ess=-5.0), "ess must be finite and >= 0"),
        (lambda: metrics.cost_metrics(seconds=1.0, num_grads=math.nan), "num_grads must be"),
        (lambda: metrics.cost_metrics(seconds="1"), "seconds must be a number"),
    ],
)
def test_invalid_input_raises(call: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()  # type: ignore[operator]
