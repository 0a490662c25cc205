r"""Rank-normalised split R-hat and bulk and tail ESS (Vehtari, Gelman, Simpson, Carpenter and
Bürkner 2021, Bayesian Analysis 16(2)), vectorised over any leading axes.

Each function takes draws shaped (..., chain, draw) and returns one value per leading index: as
ArviZ's ``rhat(method="rank")`` and ``ess(method="bulk" | "tail")`` compute for one (chain,
draw) array, but for every test point (and every chain, see
:func:`ppl_bnn.reference.chains.per_chain_diagnostics`) at once, not one ArviZ call each.

- Split: each chain's first and last ``draw // 2`` draws become two chains.
- Rank normalisation: the ranks ``r`` of the pooled draws (ties averaged) become normal scores
  :math:`z = \Phi^{-1}((r - 3/8) / (S + 1/4))` (Blom 1958), ``S`` the number of draws.
- :math:`\hat R = \sqrt{(B / W + n - 1) / n}`, ``B`` ``n`` times the variance of the chain
  means, ``W`` the mean within-chain variance, ``n`` draws per chain; the rank R-hat is the
  larger of the bulk one (of ``z``) and the tail one (of the normal scores of
  :math:`|x - \mathrm{median}(x)|`).
- ESS :math:`= C n / \hat\tau`, :math:`\hat\tau = -1 + 2 \sum_{t \le 2J - 1} \hat\rho_t +
  \hat\rho_{2J}`, from the autocorrelations :math:`\hat\rho_t` (by FFT) truncated by Geyer's
  initial positive sequence (the first pair of lags whose sum is not positive ends it) and made
  monotone (each pair's sum at most the one before), :math:`\hat\tau \ge 1 / \log_{10}(C n)`.
  Bulk ESS is that of the split chains' normal scores; tail ESS the smaller of those of the
  indicators :math:`x \le q_{0.05}` and :math:`x \le q_{0.95}` (split).
"""

from __future__ import annotations

import numpy as np
from scipy import fft, stats

#: Blom's offset in the normal scores of ranks.
_BLOM = 3.0 / 8.0
#: Tail ESS's quantiles.
_TAIL_PROBS = (0.05, 0.95)


def _split(x: np.ndarray) -> np.ndarray:
    """(..., chain, draw) -> (..., 2 chain, draw // 2): each chain's first and last halves (the
    middle draw dropped when the count is odd)."""
    half = x.shape[-1] // 2
    return np.concatenate([x[..., :half], x[..., x.shape[-1] - half :]], axis=-2)


def _normal_scores(x: np.ndarray) -> np.ndarray:
    """The normal scores of the ranks of each leading index's pooled draws (ties averaged)."""
    pooled = x.reshape(*x.shape[:-2], -1)
    ranks = stats.rankdata(pooled, method="average", axis=-1)
    size = pooled.shape[-1]
    return stats.norm.ppf((ranks - _BLOM) / (size - 2 * _BLOM + 1)).reshape(x.shape)


def _rhat(x: np.ndarray) -> np.ndarray:
    """Classic R-hat of (..., chain, draw); NaN where every draw is equal (0 / 0)."""
    n = x.shape[-1]
    between = n * x.mean(axis=-1).var(axis=-1, ddof=1)
    within = x.var(axis=-1, ddof=1).mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def rank_rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat of ``x`` (..., chain, draw): the larger of the bulk and tail
    R-hats (at least 2 chains and 4 draws each, finite; see the module docstring)."""
    x = np.asarray(x, dtype=float)
    split = _split(x)
    bulk = _rhat(_normal_scores(split))
    pooled = split.reshape(*split.shape[:-2], -1)
    median = np.median(pooled, axis=-1)[..., None, None]
    tail = _rhat(_normal_scores(np.abs(split - median)))
    return np.where(tail > bulk, tail, bulk)


def _autocovariance(x: np.ndarray) -> np.ndarray:
    """Autocovariance of each chain (..., chain, draw) at every lag, by FFT (biased: over n)."""
    n = x.shape[-1]
    centred = x - x.mean(axis=-1, keepdims=True)
    size = fft.next_fast_len(2 * n)
    spectrum = np.fft.rfft(centred, n=size, axis=-1)
    spectrum *= np.conjugate(spectrum)
    return np.fft.irfft(spectrum, n=size, axis=-1)[..., :n] / n


def _ess(x: np.ndarray) -> np.ndarray:
    """ESS of (..., chain, draw) with Geyer's initial monotone sequence (module docstring);
    every draw equal (within float resolution): the number of draws."""
    chains, n = x.shape[-2:]
    size = chains * n
    acov = _autocovariance(x)
    mean_var = acov[..., 0].mean(axis=-1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if chains > 1:
        var_plus = var_plus + x.mean(axis=-1).var(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[..., None] - acov.mean(axis=-2)) / var_plus[..., None]
    rho[..., 0] = 1.0
    # Pairs of lags (2k, 2k + 1), k = 0 .. pairs; the sequence runs while each sum is positive.
    pairs = len(range(1, n - 3, 2))
    sums = rho[..., 0 : 2 * pairs + 2 : 2] + rho[..., 1 : 2 * pairs + 2 : 2]
    stops = ~(sums[..., :pairs] > 0.0)
    kept = np.zeros(stops.shape[:-1], dtype=int)  # J: the pairs summed
    if pairs:
        kept = np.where(stops.any(axis=-1), stops.argmax(axis=-1), pairs)
    monotone = np.minimum.accumulate(sums[..., :pairs], axis=-1)
    summed = np.where(np.arange(pairs) < kept[..., None], monotone, 0.0).sum(axis=-1)
    last_even = np.take_along_axis(rho, 2 * kept[..., None], axis=-1)[..., 0]
    last_sum = np.take_along_axis(sums, kept[..., None], axis=-1)[..., 0]
    tail = np.where((last_sum >= 0) | (last_even > 0), last_even, 0.0)
    tail = np.where(kept == 0, 1.0, tail)
    tau = -1.0 + 2.0 * summed + tail
    floor = 1.0 / np.log10(size)
    tau = np.where(floor > tau, floor, tau)
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = size / tau
    constant = (x.max(axis=(-2, -1)) - x.min(axis=(-2, -1))) < np.finfo(float).resolution
    return np.where(constant, float(size), ess)


def bulk_ess(x: np.ndarray) -> np.ndarray:
    """Bulk ESS of ``x`` (..., chain, draw): that of the split chains' normal scores (at least
    4 draws per chain, finite)."""
    return _ess(_normal_scores(_split(np.asarray(x, dtype=float))))


def _quantile(ordered: np.ndarray, prob: float) -> np.ndarray:
    """R's type-7 quantile of sorted values (..., n), in the arithmetic of SciPy's
    ``mquantiles(alphap=1, betap=1)``, which ArviZ uses: its rounding decides which draws lie
    at or below the quantile."""
    n = ordered.shape[-1]
    aleph = n * prob + (1.0 + prob * (1.0 - 1.0 - 1.0))
    k = int(np.floor(np.clip(aleph, 1, n - 1)))
    gamma = float(np.clip(aleph - k, 0.0, 1.0))
    return (1.0 - gamma) * ordered[..., k - 1] + gamma * ordered[..., k]


def tail_ess(x: np.ndarray) -> np.ndarray:
    """Tail ESS of ``x`` (..., chain, draw): the smaller ESS of the split indicators of the
    draws at or below their 5% and 95% quantiles."""
    x = np.asarray(x, dtype=float)
    ordered = np.sort(x.reshape(*x.shape[:-2], -1), axis=-1)
    low, high = (
        _ess(_split((x <= _quantile(ordered, p)[..., None, None]).astype(float)))
        for p in _TAIL_PROBS
    )
    return np.where(high < low, high, low)
