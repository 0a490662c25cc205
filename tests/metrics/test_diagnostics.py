"""MCMC diagnostics on chains with known behaviour."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppl_bnn import metrics


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
