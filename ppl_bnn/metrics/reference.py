"""Distances between a predictive and a reference posterior's predictive on the same points.

Shapes as in :mod:`~ppl_bnn.metrics.regression` (``f``, ``sigma`` against ``f_ref``,
``sigma_ref``) and :mod:`~ppl_bnn.metrics.classification` (``mean_probs``, ``probs_draws``
against ``ref_mean_probs``, ``ref_probs_draws``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ppl_bnn.metrics import checks
from ppl_bnn.metrics.classification import _confidence_and_prediction
from ppl_bnn.metrics.regression import _mixture_at, _quantiles


def _paired_probs(
    mean_probs: ArrayLike, ref_mean_probs: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    p = checks.probs(mean_probs, "mean_probs", 2)
    q = checks.probs(ref_mean_probs, "ref_mean_probs", 2)
    if p.shape != q.shape:
        raise ValueError(
            f"mean_probs and ref_mean_probs must have the same shape, got {p.shape} and {q.shape}"
        )
    return p, q


def agreement(mean_probs: ArrayLike, ref_mean_probs: ArrayLike) -> float:
    """Fraction of points where the predictive and the reference pick the same class.

    Izmailov et al. 2021, "What are Bayesian neural network posteriors really like?". A row with
    non-finite probabilities on either side counts as disagreeing.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        ref_mean_probs: Reference predictive class probabilities (N, K).
    """
    p, q = _paired_probs(mean_probs, ref_mean_probs)
    pred, ref_pred = _confidence_and_prediction(p)[1], _confidence_and_prediction(q)[1]
    return float(np.mean((pred == ref_pred) & (pred >= 0)))


def total_variation(mean_probs: ArrayLike, ref_mean_probs: ArrayLike) -> float:
    r"""Mean total variation distance :math:`\frac1N\sum_n \frac12\sum_k |p_{nk} - q_{nk}|`.

    Izmailov et al. 2021. NaN if a probability is non-finite.

    Args:
        mean_probs: Predictive class probabilities (N, K).
        ref_mean_probs: Reference predictive class probabilities (N, K).
    """
    p, q = _paired_probs(mean_probs, ref_mean_probs)
    return float(np.mean(0.5 * np.abs(p - q).sum(axis=1)))


def _reference_regression_inputs(
    f: ArrayLike, sigma: ArrayLike, f_ref: ArrayLike, sigma_ref: ArrayLike
) -> tuple[np.ndarray, ...]:
    f_arr, s_arr = checks.regression_inputs(f, sigma)
    fr_arr, sr_arr = checks.regression_inputs(f_ref, sigma_ref, "f_ref", "sigma_ref")
    checks.same_points(f_arr.shape[1], fr_arr.shape[1], "f", "f_ref")
    return f_arr, s_arr, fr_arr, sr_arr


def _quantile_grid(num_quantiles: int) -> np.ndarray:
    return (np.arange(num_quantiles) + 0.5) / num_quantiles


def _w2_ks(
    f: np.ndarray,
    s: np.ndarray,
    fr: np.ndarray,
    sr: np.ndarray,
    num_quantiles: int,
    qr: np.ndarray | None = None,
) -> tuple[float, float]:
    """Mean W2 and KS distances over points between the mixtures (f, s) and (fr, sr); ``qr``:
    the reference's quantiles (:func:`reference_quantiles`), where already computed."""
    u = _quantile_grid(num_quantiles)
    q = _quantiles(f, s, u)
    qr = _quantiles(fr, sr, u) if qr is None else qr
    w2 = float(np.mean(np.sqrt(np.mean((q - qr) ** 2, axis=0))))
    # At its own quantiles each CDF equals u (up to the solver tolerance): only the other
    # mixture's CDF needs evaluating there.
    cols = np.tile(np.arange(f.shape[1]), num_quantiles)
    ref_at_q = _mixture_at(fr, sr, q.reshape(-1), cols)[0].reshape(q.shape)
    at_ref_q = _mixture_at(f, s, qr.reshape(-1), cols)[0].reshape(q.shape)
    gap = np.concatenate([u[:, None] - ref_at_q, at_ref_q - u[:, None]])
    return w2, float(np.mean(np.max(np.abs(gap), axis=0)))


def mixture_w2(
    f: ArrayLike,
    sigma: ArrayLike,
    f_ref: ArrayLike,
    sigma_ref: ArrayLike,
    num_quantiles: int = 100,
) -> float:
    r"""Mean over points of the Wasserstein-2 distance between two predictive mixtures.

    In one dimension :math:`W_2(F, G)^2 = \int_0^1 (F^{-1}(u) - G^{-1}(u))^2 du`, estimated by the
    midpoint rule at :math:`u_i = (i + 1/2)/M`, i = 0..M-1 (deterministic). The rule leaves out
    the outer tails, so it slightly underestimates (for two Gaussians the std-difference term is
    scaled by :math:`\frac1M\sum_i \Phi^{-1}(u_i)^2 < 1`). Izmailov et al. 2021 compare predictive
    marginals to a reference posterior this way. Cost: about three mixture-CDF evaluations per
    quantile, O((S + S_ref) N M) each; thin long reference runs before calling.

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        f_ref: Reference per-draw predictive means (S_ref, N).
        sigma_ref: Reference noise std (S_ref,) or (S_ref, N).
        num_quantiles: M.

    Returns:
        Mean W2 (not squared) over points, in the units of ``f``; NaN if a prediction is
        non-finite.
    """
    arrays = _reference_regression_inputs(f, sigma, f_ref, sigma_ref)
    m = checks.positive_int(num_quantiles, "num_quantiles")
    u = _quantile_grid(m)
    q, qr = _quantiles(arrays[0], arrays[1], u), _quantiles(arrays[2], arrays[3], u)
    return float(np.mean(np.sqrt(np.mean((q - qr) ** 2, axis=0))))


def mixture_ks(
    f: ArrayLike,
    sigma: ArrayLike,
    f_ref: ArrayLike,
    sigma_ref: ArrayLike,
    num_quantiles: int = 100,
) -> float:
    r"""Mean over points of the Kolmogorov-Smirnov distance between two predictive mixtures.

    :math:`\sup_t |F(t) - G(t)|`, the supremum taken over the union of both mixtures' quantiles at
    :math:`u_i = (i + 1/2)/M` (2M points; a lower bound on the exact supremum).

    Args:
        f: Per-draw predictive means (S, N).
        sigma: Per-draw noise std (S,) or (S, N).
        f_ref: Reference per-draw predictive means (S_ref, N).
        sigma_ref: Reference noise std (S_ref,) or (S_ref, N).
        num_quantiles: M.

    Returns:
        Mean KS distance in [0, 1]; NaN if a prediction is non-finite.
    """
    arrays = _reference_regression_inputs(f, sigma, f_ref, sigma_ref)
    return _w2_ks(*arrays, checks.positive_int(num_quantiles, "num_quantiles"))[1]


#: Quantiles per point of the reference metrics' W2 and KS.
REFERENCE_QUANTILES = 100

#: Fidelity to a reference is measured on this many test points, evenly spaced: its cost grows
#: with draws x points x quantiles, and a few hundred fits must be scored in minutes.
FIDELITY_POINTS = 50
#: Draws of a fit's predictive that fidelity compares, evenly thinned, and ...
FIDELITY_DRAWS = 4000
#: ... the draws of the reference's predictive they are compared with. Both bound the W2 of two
#: samples of one predictive away from 0, about as sqrt(1/S + 1/S_ref): on wine-quality-red
#: (chain-ensemble draws, standardised units) 0.0097 at 1,000 and 2,000 draws, as large as the
#: 0.01 a reference's floor is to reach. A reference's floor (:mod:`ppl_bnn.reference.chains`)
#: is measured with them too, so that it holds that part; a fit with fewer draws (a deep
#: ensemble's members, SWAG's 100) is compared with what it has.
FIDELITY_REFERENCE_DRAWS = 8000


def evenly(n: int, keep: int) -> np.ndarray:
    """At most ``keep`` evenly spaced indices of ``range(n)``, the first and the last among them."""
    return np.unique(np.linspace(0, n - 1, min(n, keep)).round().astype(int))


def reference_quantiles(f_ref: ArrayLike, sigma_ref: ArrayLike) -> np.ndarray:
    """The reference mixture's quantiles (M, N) that :func:`reference_metrics_regression`
    compares every fit with: computed once, they serve every fit on the same split."""
    fr, sr = checks.regression_inputs(f_ref, sigma_ref, "f_ref", "sigma_ref")
    return _quantiles(fr, sr, _quantile_grid(REFERENCE_QUANTILES))


def reference_metrics_regression(
    f: ArrayLike,
    sigma: ArrayLike,
    f_ref: ArrayLike,
    sigma_ref: ArrayLike,
    ref_quantiles: np.ndarray | None = None,
) -> dict[str, float]:
    """``{"ref_w2", "ref_ks"}``: :func:`mixture_w2` and :func:`mixture_ks` with 100 quantiles
    (``ref_quantiles``: the reference's, :func:`reference_quantiles`, where already known)."""
    arrays = _reference_regression_inputs(f, sigma, f_ref, sigma_ref)
    w2, ks = _w2_ks(*arrays, REFERENCE_QUANTILES, ref_quantiles)
    return {"ref_w2": w2, "ref_ks": ks}


def reference_metrics_classification(
    probs_draws: ArrayLike, ref_probs_draws: ArrayLike
) -> dict[str, float]:
    """``{"ref_agreement", "ref_tv"}`` of the draw-averaged predictives (:func:`agreement`,
    :func:`total_variation`).

    Args:
        probs_draws: Per-draw class probabilities (S, N, K).
        ref_probs_draws: Reference per-draw class probabilities (S_ref, N, K).
    """
    p = checks.probs(probs_draws, "probs_draws", 3)
    q = checks.probs(ref_probs_draws, "ref_probs_draws", 3)
    if p.shape[1:] != q.shape[1:]:
        raise ValueError(
            "probs_draws and ref_probs_draws must agree in points and classes, got "
            f"{p.shape} and {q.shape}"
        )
    mean_p, mean_q = p.mean(axis=0), q.mean(axis=0)
    return {
        "ref_agreement": agreement(mean_p, mean_q),
        "ref_tv": total_variation(mean_p, mean_q),
    }
