"""Sampling a reference's chain ensemble: batches of chains from deep-ensemble starts until its
floor is fine enough, its chains many enough or its time spent (see
:class:`~ppl_bnn.reference.ReferenceSettings`).

Each batch is one ``fit(model, engine, backend="numpyro", init="ensemble", ...)`` with a child
seed of the reference's, so its chains start at the members of a deep ensemble of their own.
Each batch is summarised once (:func:`~ppl_bnn.reference.chains.summarise_chains`), the
summaries joined and judged chain by chain after every batch, and at the end the batches'
chains are joined into one result and the stuck ones dropped: what comes
back holds the kept chains only, and the assessment says which were dropped and why.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from ppl_bnn.fit import fit
from ppl_bnn.model.bnn import BNN
from ppl_bnn.reference import REFERENCE_BACKEND, ReferenceSettings
from ppl_bnn.reference.chains import (
    ChainAssessment,
    ChainSummary,
    assess_summary,
    complete_record,
    summarise_chains,
)
from ppl_bnn.results import FitResult
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)


def join_chains(results: list[FitResult]) -> FitResult:
    """The chains of several fits of one model by one method as one result: draws, sampler
    statistics and log-likelihoods stacked along the chain axis, timings summed, each fit's
    ``info`` kept under ``info["batches"]``."""
    first = results[0]

    def stacked(arrays: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(arrays, axis=0)

    stats = [k for k in first.sample_stats if all(k in r.sample_stats for r in results)]
    return dataclasses.replace(
        first,
        draws={k: stacked([r.draws[k] for r in results]) for k in first.draws},
        sample_stats={k: stacked([r.sample_stats[k] for r in results]) for k in stats},
        log_likelihood=stacked([r.log_likelihood for r in results]),
        timings={k: float(sum(r.timings.get(k, 0.0) for r in results)) for k in first.timings},
        options={**first.options, "num_chains": sum(r.num_chains for r in results)},
        info={**first.info, "batches": [r.info for r in results]},
    )


def keep_chains(result: FitResult, chains: list[int]) -> FitResult:
    """``result`` with only ``chains`` (their draws, statistics and log-likelihoods)."""
    return dataclasses.replace(
        result,
        draws={k: v[chains] for k, v in result.draws.items()},
        sample_stats={k: v[chains] for k, v in result.sample_stats.items()},
        log_likelihood=result.log_likelihood[chains],
    )


def _floor_value(assessment: ChainAssessment) -> float:
    """The floor the stopping rule reads: W2 for regression, total variation otherwise."""
    floor = assessment.floor
    return floor.get("ref_w2", floor.get("ref_tv", float("inf")))


def sample_reference(
    model: BNN, x_test: np.ndarray, settings: ReferenceSettings
) -> tuple[FitResult, ChainAssessment]:
    """Sample ``model``'s chain ensemble as ``settings`` say, judge it at ``x_test`` and return
    the kept chains with the assessment. ``info``: ``stopped`` (why no batch followed),
    ``sampling_seconds``, ``trace`` (after each batch: chains run and kept, seconds, floor in
    the model's units) and ``chains`` (the assessment)."""
    began = now()
    batches: list[FitResult] = []
    summaries: list[ChainSummary] = []
    trace: list[dict[str, float]] = []
    while True:
        seed = child_seed(settings.seed, f"reference_batch{len(batches)}")
        batches.append(fit(model, settings.engine, backend=REFERENCE_BACKEND, seed=seed,
                           **settings.engine_options()))  # fmt: skip
        summaries.append(summarise_chains(batches[-1], x_test))
        joined = ChainSummary.join(summaries)
        # What only the record reads is measured once, at the end.
        assessment = assess_summary(joined, seed=settings.seed, for_record=False)
        elapsed = now() - began
        # The last batch's time predicts the next one's (the first's includes compiling).
        per_batch = elapsed - (trace[-1]["seconds"] if trace else 0.0)
        trace.append({"chains": assessment.num_chains, "kept": len(assessment.kept),
                      "seconds": elapsed, **assessment.floor})  # fmt: skip
        floor = f"{_floor_value(assessment):.4g}" if assessment.has_floor else "none yet"
        logger.info("reference: %d of at most %d chains run (%d kept) in %.0f s; floor %s "
                    "(target %g)", assessment.num_chains, settings.num_chains,
                    len(assessment.kept), elapsed, floor, settings.target_floor)  # fmt: skip
        if assessment.has_floor and _floor_value(assessment) <= settings.target_floor:
            stopped = "reached the target floor"
        elif assessment.num_chains + settings.chains_per_batch > settings.num_chains:
            stopped = f"ran {assessment.num_chains} of at most {settings.num_chains} chains"
        elif elapsed + per_batch > settings.max_seconds:
            stopped = f"another batch would end after the {settings.max_seconds:g} s budget"
        else:
            continue
        break
    complete_record(assessment, joined, seed=settings.seed)
    kept = keep_chains(join_chains(batches), assessment.kept)
    kept.info.update(
        stopped=stopped, sampling_seconds=elapsed, trace=trace, chains=assessment.to_dict()
    )
    return kept, assessment
