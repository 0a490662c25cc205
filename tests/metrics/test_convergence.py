"""The vectorised rank R-hat and bulk/tail ESS against ArviZ's own, one (chain, draw) array at a
time, and the per-chain diagnostics against the one-chain diagnostics of each chain."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from arviz.stats.diagnostics import _ess_bulk, _ess_tail, _rhat_rank

from ppl_bnn import metrics
from ppl_bnn.metrics import convergence

#: The same estimator in other arithmetic: only rounding may differ.
RTOL = 1e-12


def _draws(kind: str, chains: int, draws: int, seed: int) -> np.ndarray:
    """Three arrays (3, chain, draw) of one kind of chain."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, chains, draws))
    if kind == "autocorrelated":  # AR(1) with coefficient 0.95: a small ESS
        for t in range(1, draws):
            x[..., t] = 0.95 * x[..., t - 1] + 0.3 * x[..., t]
    elif kind == "ties":
        x = np.round(x)
    elif kind == "constant":
        x[1] = 2.0
    elif kind == "stuck":  # one chain away from the others: a large R-hat
        x[:, 0] += 5.0
    return x


def _arviz(function, x: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.array([function(one) for one in x])


KINDS = ("independent", "autocorrelated", "ties", "constant", "stuck")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chains", [1, 2, 4])
@pytest.mark.parametrize("draws", [4, 5, 9, 50, 101, 400])
def test_rhat_and_ess_are_arviz_s(kind, chains, draws):
    x = _draws(kind, chains, draws, seed=chains * 1000 + draws)
    with np.errstate(all="ignore"):
        found = {
            "bulk": (convergence.bulk_ess(x), _arviz(_ess_bulk, x)),
            "tail": (convergence.tail_ess(x), _arviz(_ess_tail, x)),
        }
        if chains > 1:
            found["rhat"] = (convergence.rank_rhat(x), _arviz(_rhat_rank, x))
    for name, (ours, theirs) in found.items():
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, equal_nan=True, err_msg=name)


def test_the_kinds_give_what_they_should():
    """Not only equal to ArviZ: an autocorrelated chain has a small ESS, a stuck chain a large
    R-hat, and equal draws an undefined R-hat and as many effective draws as draws."""
    assert convergence.bulk_ess(_draws("autocorrelated", 4, 400, 0)).max() < 200
    assert convergence.bulk_ess(_draws("independent", 4, 400, 0)).min() > 1000
    assert convergence.rank_rhat(_draws("stuck", 4, 400, 0)).min() > 1.5
    constant = _draws("constant", 4, 400, 0)[1]
    with np.errstate(all="ignore"):
        assert np.isnan(convergence.rank_rhat(constant))
    assert convergence.bulk_ess(constant) == 1600


def test_each_chain_gets_the_diagnostics_of_that_chain_alone():
    rng = np.random.default_rng(5)
    draws = rng.normal(size=(6, 40, 12)).cumsum(axis=1)
    draws[2, 7, 3] = np.nan  # one chain's non-finite point: R-hat inf there
    draws[4, :, :] = 1.0  # a chain of equal draws: R-hat undefined at every point
    rhat, ess = metrics.each_chain_diagnostics(draws)
    for chain in range(6):
        alone = metrics.prediction_diagnostics(draws[chain][None])
        np.testing.assert_allclose(rhat[chain], alone["rhat_max"], rtol=RTOL, equal_nan=True)
        np.testing.assert_allclose(ess[chain], alone["ess_bulk_min"], rtol=RTOL, equal_nan=True)
    assert rhat[2] == np.inf and np.isnan(rhat[4])


def test_many_points_are_diagnosed_in_chunks_as_in_one_pass(monkeypatch):
    from ppl_bnn.metrics import diagnostics

    draws = np.random.default_rng(6).normal(size=(3, 30, 40))
    whole = metrics.prediction_diagnostics(draws)
    monkeypatch.setattr(diagnostics, "_POINTS_CHUNK_DRAWS", 3 * 30 * 7)  # chunks of 7 points
    assert metrics.prediction_diagnostics(draws) == whole
