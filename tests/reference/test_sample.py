"""Sampling a chain-ensemble reference: the batches, why they stop, and what a reference of a
network with a symmetric weight posterior shows (weight-space R-hat far from 1, a small floor)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ppl_bnn import BNN
from ppl_bnn.files import import_arviz
from ppl_bnn.methods import get_method, make_options
from ppl_bnn.metrics.reference import FIDELITY_POINTS, evenly
from ppl_bnn.reference import ENGINES, REFERENCE_BACKEND, ReferenceSettings
from ppl_bnn.reference.chains import (
    ChainSummary,
    assess_chains,
    assess_summary,
    complete_record,
    per_chain_diagnostics,
    summarise_chains,
)
from ppl_bnn.reference.sample import join_chains, keep_chains, sample_reference

pytestmark = pytest.mark.runtime(60)  # seconds on 2 cores: started first (tests/conftest.py)

#: Short NUTS chains: the point is the ensemble, not the length of each chain.
SHORT = {"engine": "nuts", "num_warmup": 100, "num_samples": 100, "max_tree_depth": 5}
X_TEST = np.linspace(-1, 1, 20)[:, None]


@pytest.fixture(scope="module")
def model() -> BNN:
    """One tanh unit: flipping the signs of its input weight, bias and output weight gives the
    same function, so the weight posterior has two mirror-image modes."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(40, 1))
    return BNN(x, np.tanh(2 * x[:, 0]) + 0.05 * rng.normal(size=40), hidden=(1,),
               activation="tanh", noise="learned")  # fmt: skip


@pytest.fixture(scope="module")
def sampled(model: BNN) -> tuple:
    settings = ReferenceSettings(num_chains=8, chains_per_batch=4, target_floor=1e-9, **SHORT)
    return sample_reference(model, X_TEST, settings)


def test_weight_space_rhat_is_far_from_one_while_the_floor_is_small(sampled: tuple) -> None:
    result, assessment = sampled
    az = import_arviz()
    w0 = result.draws["w0"][..., 0, 0]  # (chain, draw): the input weight's sign is each mode's
    assert (w0.mean(axis=1) > 0).any() and (w0.mean(axis=1) < 0).any()
    weight_rhat = float(az.rhat(az.convert_to_dataset({"w": w0}))["w"])
    assert weight_rhat > 1.2  # the chains sit in mirror-image modes ...
    found = assessment.metrics()
    assert found["rhat_across"] < 1.05  # ... that give the same functions,
    assert found["floor_w2_std"] < 0.01  # and the halves of the ensemble agree.


def test_batches_run_until_the_chains_are_spent_and_say_why(sampled: tuple) -> None:
    result, assessment = sampled
    assert result.info["stopped"] == "ran 8 of at most 8 chains"
    trace = result.info["trace"]
    assert [t["chains"] for t in trace] == [4, 8] and trace[0]["seconds"] < trace[1]["seconds"]
    assert all(t["ref_w2"] > 0 for t in trace)
    assert result.num_chains == len(assessment.kept) == 8 and not assessment.dropped
    assert result.info["chains"]["floor"] == assessment.floor
    # The random split (the floor's Monte Carlo part) is measured once, for the record.
    assert assessment.floor_random["ref_w2"] > 0 and "floor_w2_random" in assessment.metrics()


def test_a_reached_target_floor_stops_after_one_batch(model: BNN) -> None:
    settings = ReferenceSettings(num_chains=8, chains_per_batch=4, target_floor=1.0, **SHORT)
    result, _ = sample_reference(model, X_TEST, settings)
    assert result.info["stopped"] == "reached the target floor" and result.num_chains == 4


def test_chains_are_joined_and_kept_by_index(sampled: tuple) -> None:
    result, _ = sampled
    halves = [keep_chains(result, [0, 1]), keep_chains(result, [5])]
    joined = join_chains(halves)
    assert joined.num_chains == 3 and joined.options["num_chains"] == 3
    np.testing.assert_array_equal(joined.draws["w0"][2], result.draws["w0"][5])
    np.testing.assert_array_equal(joined.log_likelihood[1], result.log_likelihood[1])
    assert joined.timings["total"] == pytest.approx(2 * result.timings["total"])
    assert len(joined.info["batches"]) == 2


def test_batches_summarised_apart_and_joined_judge_as_the_joined_chains(sampled: tuple) -> None:
    result, _ = sampled
    parts = [keep_chains(result, [0, 1, 2]), keep_chains(result, [3, 4, 5, 6, 7])]
    joined = assess_summary(ChainSummary.join([summarise_chains(p, X_TEST) for p in parts]))
    whole = assess_chains(result, X_TEST)
    assert joined.floor == whole.floor and joined.floor_random == whole.floor_random
    assert joined.kept == whole.kept and joined.per_chain == whole.per_chain
    assert joined.rhat_across == pytest.approx(whole.rhat_across)


def test_the_record_completes_the_stopping_rules_assessment(sampled: tuple) -> None:
    """The loop's assessment (the halves alone) completed at the end is the full one."""
    result, _ = sampled
    summary = summarise_chains(result, X_TEST)
    assessment = assess_summary(summary, for_record=False)
    assert not assessment.floor_random and math.isnan(assessment.rhat_across)
    complete_record(assessment, summary)
    whole = assess_summary(summary)
    assert assessment.floor == whole.floor and assessment.floor_random == whole.floor_random
    assert assessment.rhat_across == pytest.approx(whole.rhat_across)


def test_each_chain_is_diagnosed_at_the_points_fidelity_is_measured_on(sampled: tuple) -> None:
    result, _ = sampled
    many = np.linspace(-1, 1, 3 * FIDELITY_POINTS)[:, None]
    summary = summarise_chains(result, many)
    at = evenly(many.shape[0], FIDELITY_POINTS)
    train_ll = result.log_likelihood.mean(axis=2)
    assert summary.per_chain == per_chain_diagnostics(summary.draws[:, :, at], train_ll)
    assert summary.per_chain != per_chain_diagnostics(summary.draws, train_ll)


def test_chains_dropped_in_a_later_batch_keep_their_place_in_the_ensemble(sampled: tuple) -> None:
    result, _ = sampled
    first, second = summarise_chains(result, X_TEST), summarise_chains(result, X_TEST)
    stuck = dataclasses.replace(second, dropped={1: "frozen: step size 0 (median 0.1)"})
    assessment = assess_summary(ChainSummary.join([first, stuck]))
    assert assessment.dropped == {9: "frozen: step size 0 (median 0.1)"}
    assert assessment.num_chains == 16 and 9 not in assessment.kept and len(assessment.kept) == 15


def test_a_mams_reference_keeps_every_chain_and_its_halves_agree(model: BNN) -> None:
    """The Metropolis-adjusted engine: every chain from the ensemble's modes kept, a floor as
    small as NUTS's."""
    settings = ReferenceSettings(
        engine="mams", num_chains=8, chains_per_batch=8, target_floor=1e-9, num_warmup=200,
        num_samples=100, thinning=5,
    )  # fmt: skip
    result, assessment = sample_reference(model, X_TEST, settings)
    assert len(assessment.kept) == 8 and not assessment.dropped
    assert result.info["dropped_chains"] == []
    assert min(result.info["acceptance"]) > 0.6
    assert assessment.metrics()["floor_w2_std"] < 0.01


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_runs_on_the_references_backend_as_its_settings_ask(engine: str) -> None:
    """The options a reference batch passes (ensemble starts, vectorised chains) are ones its
    backend reads and takes, and the engine runs there."""
    settings = ReferenceSettings(engine=engine)
    method = get_method(engine, REFERENCE_BACKEND)
    made = make_options(method, settings.engine_options(), backend=REFERENCE_BACKEND)
    assert made.num_chains == settings.chains_per_batch
