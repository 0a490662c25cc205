"""Regression metrics against hand computations, closed forms and numerical integrals."""

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
    np.testing.assert_allclose(metrics.log_predictive_density(f, sigma, y), expected, rtol=1e-12)


def test_pointwise_ll_mixture_by_hand() -> None:
    f = np.array([[1.0, -1.0], [2.0, 0.0], [4.0, 0.5]])
    sigma = np.array([0.5, 1.0, 2.0])
    y = np.array([1.5, -0.5])
    dens = stats.norm.pdf(y[None, :], loc=f, scale=sigma[:, None]).mean(axis=0)
    np.testing.assert_allclose(
        metrics.log_predictive_density(f, sigma, y), np.log(dens), rtol=1e-12
    )
    # Per-point sigma (S, N) gives the same result when it repeats the per-draw values.
    sigma_2d = np.repeat(sigma[:, None], 2, axis=1)
    np.testing.assert_allclose(
        metrics.log_predictive_density(f, sigma_2d, y), np.log(dens), rtol=1e-12
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
    assert metrics.log_predictive_density(f, sigma, y)[0] == pytest.approx(expected, rel=1e-12)


def test_test_log_likelihood_counts_nonfinite_points() -> None:
    f = np.array([[0.0, np.nan, 1.0], [0.5, 0.0, 1.0]])
    sigma = np.array([1.0, 1.0])
    y = np.array([0.0, 0.0, 1.0])
    pointwise = metrics.log_predictive_density(f, sigma, y)
    assert np.isnan(pointwise[1])
    mean, bad = metrics.test_log_likelihood(f, sigma, y)
    assert bad == 1
    assert mean == pytest.approx((pointwise[0] + pointwise[2]) / 2)
    all_bad = metrics.test_log_likelihood(np.full((2, 3), np.nan), sigma, y)
    assert math.isnan(all_bad[0]) and all_bad[1] == 3


def test_infinite_draw_output_is_a_valid_mixture_component() -> None:
    # A component at +inf has zero density at y: the log-likelihood is that of the other half.
    f = np.array([[0.0], [np.inf]])
    ll = metrics.log_predictive_density(f, np.array([1.0, 1.0]), np.array([0.0]))
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


@pytest.mark.parametrize(
    ("columns", "step", "pieces"),
    [(5000, 1747, 4), (1749, 1747, 4), (7, 3, 2), (1, 8, 4), (9, 100, 1)],
)
def test_column_parts_cut_each_chunk_into_parts_of_two_columns_or_more(columns, step, pieces):
    """With the next test, the threads' parts give the bits one thread's chunks give: a chunk
    of one column stays whole, and each other part has two columns or more."""
    from ppl_bnn.metrics.regression import _column_parts

    parts = _column_parts(columns, step, pieces)
    assert [p.start for p in parts] == [0, *(p.stop for p in parts[:-1])]
    assert parts[-1].stop == columns
    chunks = {(start, min(start + step, columns)) for start in range(0, columns, step)}
    for part in parts:
        start = part.start - part.start % step  # the chunk it is cut from
        assert part.stop <= min(start + step, columns)
        chunk = (start, min(start + step, columns))
        assert part.stop - part.start >= 2 or chunk[1] - chunk[0] == 1
    assert len(parts) <= len(chunks) * pieces


def test_a_mean_over_draws_of_two_columns_or_more_has_the_bits_of_the_whole_chunk():
    """numpy sums a (draws, columns) array over its draws in draw order for two columns or more,
    and one column alone pairwise: why no part has one column unless its chunk has."""
    values = np.random.default_rng(1).normal(size=(2400, 9))
    whole = values.mean(axis=0)
    for start in range(8):
        np.testing.assert_array_equal(
            values[:, start : start + 2].mean(axis=0), whole[start : start + 2]
        )
    alone = [np.ascontiguousarray(values[:, i : i + 1]).mean(axis=0)[0] for i in range(9)]
    assert not np.array_equal(alone, whole)


@pytest.mark.parametrize("threads", [2, 5])
def test_the_mixture_cdf_and_quantiles_are_the_same_bits_on_any_number_of_threads(
    monkeypatch, threads
):
    """The threads take parts of the chunks one thread takes, whose sums over draws run in the
    same order (regression.py's _column_parts). 3,000 draws at 1,399 points: chunks of 1,398
    points and of 1, whose mean alone is summed pairwise."""
    from ppl_bnn.metrics import regression

    rng = np.random.default_rng(0)
    f = rng.normal(size=(3000, 1399)) + np.sin(np.arange(1399))
    sigma = np.exp(rng.normal(size=3000) * 0.1) * 0.5
    t = rng.normal(size=1399)
    probs = [0.025, 0.3, 0.5, 0.975]
    monkeypatch.setattr(regression, "host_threads", lambda: 1)
    one = metrics.mixture_cdf(f, sigma, t), metrics.mixture_quantiles(f, sigma, probs)
    monkeypatch.setattr(regression, "host_threads", lambda: threads)
    np.testing.assert_array_equal(metrics.mixture_cdf(f, sigma, t), one[0])
    np.testing.assert_array_equal(metrics.mixture_quantiles(f, sigma, probs), one[1])


def test_host_threads_keep_to_the_process_s_thread_budget(monkeypatch):
    from ppl_bnn import devices

    monkeypatch.setattr(devices, "cpu_count", lambda: 4)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert devices.host_threads() == 4
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert devices.host_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    assert devices.host_threads() == 4
