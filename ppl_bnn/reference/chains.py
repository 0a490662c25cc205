r"""A chain ensemble judged chain by chain in function space, and the floor it resolves to.

A reference posterior of a BNN is a *chain ensemble* (Sommer et al., ICML 2024, DEI-MCMC;
MILE, ICLR 2025): K chains, each started at its own member of a deep ensemble, each exploring
the mode it starts in. Across-chain R-hat asks chains to agree across modes, which they never
do, so it is kept only as a measure of how multimodal the posterior is (``rhat_across``).
Instead:

- **Each chain on its own.** Split-R-hat of its two halves and bulk ESS, of the predictive at
  the test points fidelity is measured on (the largest R-hat and smallest ESS over points) and
  of its training log likelihood per draw (:func:`~ppl_bnn.metrics.prediction_diagnostics`):
  whether it is stationary and how much it explores within its mode.
- **Stuck chains are dropped and counted**: one whose sampler froze (a step size that is not
  finite, or below :data:`FROZEN_STEP_SHARE` of the chains' median), one with a non-finite
  draw, or one that fits its own training data worse than the constant predictor
  (:func:`~ppl_bnn.metrics.constant_log_likelihood`), the baseline every usable fit must beat.
- **The floor.** The kept chains are split into two disjoint halves (alternate chains), which
  are scored against each other with exactly the contestants' fidelity metrics and sample sizes
  (:mod:`ppl_bnn.metrics.reference`): W2 for regression, total variation and agreement for
  classification. That is the distance of two independent references of K/2 chains each: a
  contestant whose distance to the reference is within it cannot be told from one
  (Izmailov et al. 2021, "What are Bayesian neural network posteriors really like?", judge HMC
  by the agreement of independent runs the same way). The same statistic on a random split of
  the pooled draws is kept beside it: its Monte Carlo part alone. The floor shrinks as chains
  are added, at first about as :math:`1/\sqrt K`, then more slowly as that Monte Carlo part
  takes over.

A floor needs two halves of at least two chains each: :data:`MIN_CHAINS` kept chains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppl_bnn import metrics
from ppl_bnn.metrics.reference import (
    FIDELITY_DRAWS,
    FIDELITY_POINTS,
    FIDELITY_REFERENCE_DRAWS,
    REFERENCE_QUANTILES,
    evenly,
)
from ppl_bnn.results import FitResult
from ppl_bnn.seeding import numpy_generator

#: Kept chains a floor needs: two halves of two chains each.
MIN_CHAINS = 4
#: A chain whose step size is below this share of the chains' median step size has frozen.
FROZEN_STEP_SHARE = 1e-3
#: Sampler statistics that hold each draw's step size, by engine.
_STEP_SIZE_STATS = ("step_size",)


@dataclass
class ChainAssessment:
    """What :func:`assess_chains` found: per-chain diagnostics, the chains kept and dropped
    (and why), across-chain R-hat over the kept ones and the floor.

    The floor's values are in the units of the predictive given (the model's standardised units
    for a regression fit: multiply by the target's std for original units, W2 being
    equivariant); ``floor`` maps metric names (``ref_w2``, ``ref_tv``, ``ref_agreement``) to the
    halves' distance, and ``floor_random`` to the same on a random split of the pooled draws.
    """

    num_chains: int
    kept: list[int]
    dropped: dict[int, str]
    per_chain: dict[str, list[float]] = field(default_factory=dict)
    rhat_across: float = math.nan
    floor: dict[str, float] = field(default_factory=dict)
    floor_random: dict[str, float] = field(default_factory=dict)

    @property
    def has_floor(self) -> bool:
        """Whether enough chains were kept for a floor (:data:`MIN_CHAINS`)."""
        return bool(self.floor)

    def metrics(self, scale: float = 1.0) -> dict[str, float]:
        """Flat metrics for a record: the chains run and kept, across-chain R-hat, the chains'
        median R-hat and ESS on their own, and the floors, ``floor_<metric>`` and
        ``floor_<metric>_random``; W2 is multiplied by ``scale`` (the target's std: original
        units) and kept unscaled as ``floor_w2_std``."""
        out = {
            "chains_run": float(self.num_chains),
            "chains_kept": float(len(self.kept)),
            "rhat_across": float(self.rhat_across),
        }
        for key in ("rhat", "ess"):
            kept = [self.per_chain[key][c] for c in self.kept] if self.per_chain else []
            out[f"{key}_within_median"] = float(np.median(kept)) if kept else math.nan
        for suffix, found in (("", self.floor), ("_random", self.floor_random)):
            for name, value in found.items():
                metric = name.removeprefix("ref_")
                out[f"floor_{metric}{suffix}"] = value * scale if metric == "w2" else value
                if metric == "w2":
                    out[f"floor_w2_std{suffix}"] = value
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for a record's ``info``."""
        return {
            "num_chains": self.num_chains,
            "kept": self.kept,
            "dropped": {str(k): v for k, v in self.dropped.items()},
            "per_chain": self.per_chain,
            "rhat_across": self.rhat_across,
            "floor": self.floor,
            "floor_random": self.floor_random,
        }


def per_chain_diagnostics(f: np.ndarray, train_ll: np.ndarray) -> dict[str, list[float]]:
    """Each chain's ``rhat`` / ``ess`` of the predictive ``f`` (chain, draw, point) and
    ``rhat_ll`` / ``ess_ll`` of its training log-likelihood per draw ``train_ll`` (chain,
    draw): split-R-hat of the chain's halves (largest over points) and its bulk ESS (smallest),
    every chain at once (:func:`~ppl_bnn.metrics.diagnostics.each_chain_diagnostics`)."""
    rhat, ess = metrics.each_chain_diagnostics(f)
    rhat_ll, ess_ll = metrics.each_chain_diagnostics(train_ll[:, :, None])
    found = {"rhat": rhat, "ess": ess, "rhat_ll": rhat_ll, "ess_ll": ess_ll}
    return {key: [float(v) for v in values] for key, values in found.items()}


def stuck_chains(
    step_sizes: np.ndarray | None, finite: np.ndarray, train_ll: np.ndarray, baseline: float
) -> dict[int, str]:
    """Chain -> why it is dropped: frozen (its step size, ``step_sizes`` (chain,), not finite or
    below :data:`FROZEN_STEP_SHARE` of the median), a non-finite draw (``finite`` (chain,)
    False), or a mean training log-likelihood per point (``train_ll`` (chain, draw)) below the
    constant predictor's, ``baseline``."""
    dropped: dict[int, str] = {}
    if step_sizes is not None:
        median = float(np.nanmedian(np.where(np.isfinite(step_sizes), step_sizes, np.nan)))
        for chain, size in enumerate(step_sizes):
            if not np.isfinite(size) or not size > FROZEN_STEP_SHARE * median:
                dropped[chain] = f"frozen: step size {size:.3g} (median {median:.3g})"
    for chain in np.flatnonzero(~finite):
        dropped.setdefault(int(chain), "a draw is not finite")
    mean_ll = train_ll.mean(axis=1)
    for chain in np.flatnonzero(mean_ll < baseline):
        dropped.setdefault(
            int(chain),
            f"worse than the constant predictor on its training data (log-likelihood "
            f"{mean_ll[chain]:.3g} per point, the constant's {baseline:.3g})",
        )
    return dict(sorted(dropped.items()))


def _pooled(values: np.ndarray, chains: np.ndarray) -> np.ndarray:
    """The draws of ``chains`` pooled: (chain, draw, ...) -> (chains * draw, ...)."""
    return values[chains].reshape(-1, *values.shape[2:])


def _regression_distance(
    f: np.ndarray, sigma: np.ndarray, first: np.ndarray, second: np.ndarray
) -> dict[str, float]:
    """W2 between the draws ``first`` (as a fit) and ``second`` (as the reference) of pooled
    ``f`` (draw, point) and ``sigma`` (draw,), at the contestants' sample sizes."""
    a = first[evenly(len(first), FIDELITY_DRAWS)]
    b = second[evenly(len(second), FIDELITY_REFERENCE_DRAWS)]
    w2 = metrics.mixture_w2(f[a], sigma[a], f[b], sigma[b], REFERENCE_QUANTILES)
    return {"ref_w2": w2}


def _classification_distance(
    probs: np.ndarray, first: np.ndarray, second: np.ndarray
) -> dict[str, float]:
    """Total variation and agreement between the mean predictives of draws ``first`` and
    ``second`` of pooled class probabilities ``probs`` (draw, point, class)."""
    p, q = probs[first].mean(axis=0), probs[second].mean(axis=0)
    return {"ref_tv": metrics.total_variation(p, q), "ref_agreement": metrics.agreement(p, q)}


#: The two ways :func:`floor` splits the kept chains' draws in two.
SPLITS = ("halves", "random")


def floor(
    kept: list[int],
    split: str = "halves",
    *,
    f: np.ndarray | None = None,
    sigma: np.ndarray | None = None,
    probs: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """The distance between two halves of the ``kept`` chains' draws: ``split`` "halves" puts
    alternate chains in each (the floor), "random" a random half of their pooled draws (its
    Monte Carlo part alone). Regression from ``f`` (chain, draw, point) and ``sigma`` (chain,
    draw), on at most :data:`~ppl_bnn.metrics.reference.FIDELITY_POINTS` evenly spaced points;
    classification from ``probs`` (chain, draw, point, class). Empty with fewer than
    :data:`MIN_CHAINS` chains."""
    regression = f is not None and sigma is not None
    if not regression and probs is None:
        raise ValueError("floor needs f and sigma (regression) or probs (classification)")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: one of {', '.join(SPLITS)}")
    if len(kept) < MIN_CHAINS:
        return {}
    chains = np.asarray(kept)
    per_chain = (f if regression else probs).shape[1]
    offsets = np.arange(len(chains))[:, None] * per_chain + np.arange(per_chain)
    if split == "halves":
        first, second = offsets[0::2].ravel(), offsets[1::2].ravel()
    else:
        shuffled = numpy_generator(seed, "reference_floor").permutation(offsets.size)
        half = offsets.size // 2
        first, second = np.sort(shuffled[:half]), np.sort(shuffled[half:])
    if regression:
        points = evenly(f.shape[2], FIDELITY_POINTS)
        pooled_f, pooled_sigma = _pooled(f[:, :, points], chains), _pooled(sigma, chains)
        return _regression_distance(pooled_f, pooled_sigma, first, second)
    return _classification_distance(_pooled(probs, chains), first, second)


def _step_sizes(result: FitResult) -> np.ndarray | None:
    """Each chain's step size at the end of its warm-up, where the sampler records one per
    draw (NumPyro's NUTS and HMC); None for a sampler that drops frozen chains itself
    (:mod:`ppl_bnn.backends.numpyro.mclmc`)."""
    for name in _STEP_SIZE_STATS:
        if name in result.sample_stats:
            return np.asarray(result.sample_stats[name], dtype=np.float64)[:, -1]
    return None


@dataclass(frozen=True)
class ChainSummary:
    """What the assessment needs of some chains, computed once per batch and joined across
    batches (so adding a batch never recomputes the earlier ones).

    Attributes:
        draws: The predictive at the test inputs, (chain, draw, point): the mean for a
            regression fit, class probabilities (chain, draw, point, class) otherwise.
        sigma: A regression fit's noise std, (chain, draw); None for classification.
        dropped: Chain -> why it is dropped (:func:`stuck_chains`).
        per_chain: :func:`per_chain_diagnostics` of the chains.
    """

    draws: np.ndarray
    sigma: np.ndarray | None
    dropped: dict[int, str]
    per_chain: dict[str, list[float]]

    @property
    def num_chains(self) -> int:
        return int(self.draws.shape[0])

    @classmethod
    def join(cls, parts: list[ChainSummary]) -> ChainSummary:
        """The chains of ``parts`` in order, as one summary."""
        offsets = np.cumsum([0, *(part.num_chains for part in parts)])[:-1]
        sigmas = [part.sigma for part in parts]
        dropped = {
            int(chain + offset): why
            for part, offset in zip(parts, offsets, strict=True)
            for chain, why in part.dropped.items()
        }
        per_chain = {key: [v for part in parts for v in part.per_chain[key]]
                     for key in parts[0].per_chain}  # fmt: skip
        return cls(
            draws=np.concatenate([part.draws for part in parts]),
            sigma=None if sigmas[0] is None else np.concatenate(sigmas),
            dropped=dropped,
            per_chain=per_chain,
        )


def summarise_chains(result: FitResult, x_test: np.ndarray) -> ChainSummary:
    """``result``'s chains at ``x_test``: their predictive, the stuck ones (against the
    constant predictor of its training targets) and their per-chain diagnostics."""
    pred = result.predict(x_test)
    num_chains, num_draws = result.num_chains, result.num_draws
    per_draw = pred.draws.reshape(num_chains, num_draws, *pred.draws.shape[1:])
    train_ll = result.log_likelihood.mean(axis=2)  # (chain, draw): per point
    finite = np.isfinite(per_draw).reshape(num_chains, -1).all(axis=1) & np.isfinite(train_ll).all(
        axis=1
    )
    spec = result.spec
    regression = spec.likelihood == "gaussian"
    classes = {} if regression else {"num_classes": spec.num_classes}
    baseline = metrics.constant_log_likelihood(result.observed, result.observed, **classes)
    points = evenly(per_draw.shape[2], FIDELITY_POINTS)
    sigma = None
    if regression:
        sigma = np.broadcast_to(pred.noise_std, (num_chains * num_draws,))
        sigma = sigma.reshape(num_chains, num_draws)
    return ChainSummary(
        draws=per_draw,
        sigma=sigma,
        dropped=stuck_chains(_step_sizes(result), finite, train_ll, baseline),
        # At the points fidelity is measured on: ArviZ takes milliseconds a point and chain.
        per_chain=per_chain_diagnostics(
            (per_draw if regression else per_draw.max(axis=-1))[:, :, points], train_ll
        ),
    )


def _floor_of(summary: ChainSummary, kept: list[int], split: str, seed: int) -> dict[str, float]:
    if summary.sigma is not None:
        return floor(kept, split, f=summary.draws, sigma=summary.sigma, seed=seed)
    return floor(kept, split, probs=summary.draws, seed=seed)


def assess_summary(
    summary: ChainSummary, *, seed: int = 0, for_record: bool = True
) -> ChainAssessment:
    """Judge the chains of ``summary`` (see the module docstring): the floor is in the model's
    units. ``for_record`` False leaves out what only the record reads (:func:`complete_record`),
    each costing seconds more as chains are added: the stopping rule reads the halves' floor
    and the chains kept."""
    kept = [c for c in range(summary.num_chains) if c not in summary.dropped]
    assessment = ChainAssessment(summary.num_chains, kept, dict(summary.dropped))
    assessment.per_chain = summary.per_chain
    assessment.floor = _floor_of(summary, kept, "halves", seed)
    if for_record:
        complete_record(assessment, summary, seed=seed)
    return assessment


def complete_record(assessment: ChainAssessment, summary: ChainSummary, *, seed: int = 0) -> None:
    """Add to ``assessment`` of ``summary``'s chains what only its record reads: across-chain
    R-hat and the floor's Monte Carlo part (the random split)."""
    kept = assessment.kept
    if len(kept) >= 2:
        regression = summary.sigma is not None
        predictive = summary.draws if regression else summary.draws.max(axis=-1)
        assessment.rhat_across = metrics.prediction_diagnostics(predictive[kept])["rhat_max"]
    assessment.floor_random = _floor_of(summary, kept, "random", seed)


def assess_chains(result: FitResult, x_test: np.ndarray, *, seed: int = 0) -> ChainAssessment:
    """Judge ``result``'s chains (see the module docstring) from its predictive at ``x_test``
    and its training log-likelihood; the floor is in the model's units."""
    return assess_summary(summarise_chains(result, x_test), seed=seed)
