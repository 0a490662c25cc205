"""The recommendation rule (:mod:`ppl_bnn.report.recommend`) on constructed results: as good only
where shown equivalent, undecided where the seeds cannot tell, no reference, a reference without
a floor, every contestant unusable, a cheaper contestant that is worse, the floor in the margin,
contestants as good as the reference, a trusted sampler whose chains disagree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppl_bnn.reference import PREDICTIONS_FILE
from ppl_bnn.report.equivalence import Margins
from ppl_bnn.report.recommend import FIDELITY_WHY, Grade, recommend, with_cost
from ppl_bnn.report.reference_entries import ReferenceEntry

#: Per-seed offsets: a group's values are its mean plus these (three replicates, sd 1).
NOISE = np.array([-1.0, 0.0, 1.0])


def _cells(groups: dict[str, dict[str, object]]) -> pd.DataFrame:
    """Three seeds per ``method/numpyro``; each value ``(mean, wobble)`` becomes
    mean + wobble * NOISE[seed] (a shared wobble keeps paired differences exact)."""
    rows = []
    for method, spec in groups.items():
        for seed in range(3):
            row: dict[str, object] = {
                "dataset": "sine",
                "method": method,
                "backend": "numpyro",
                "split": 0,
                "seed": seed,
                "status": spec.get("status", "ok"),
                "rmse": 1.0,
                "time_total": spec.get("cost", 1.0),
                "time_compile": spec.get("compile", 0.0),
                "flags": spec.get("flags"),
            }
            for column in (
                "ref_w2", "test_ll", "ref_std_ratio_out", "ref_floor_ratio", "rhat_max"
            ):  # fmt: skip
                if column in spec:
                    mean, wobble = spec[column]
                    row[column] = mean + wobble * NOISE[seed]
            rows.append(row)
    return with_cost(pd.DataFrame(rows))


def _reference(tmp_path: Path, passed: bool | None, split: int = 0) -> ReferenceEntry:
    """A reference with predictions (with a floor or not); ``passed=None``: an infeasible one,
    with none."""
    if passed is not None:
        (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    return ReferenceEntry(
        dataset="sine",
        split=split,
        status="ok" if passed is not None else "infeasible",
        passed=passed,
        note=None,
        gate={"min_chains": 4},
        diagnostics={},
        settings={},
        wall_s=1.0,
        folder=tmp_path,
    )


def _grades(rec) -> dict[str, Grade]:
    return {s.group[0]: s.grade for s in rec.standings}


def test_only_a_contestant_shown_equivalent_is_as_good_and_its_cheapest_named(tmp_path):
    cells = _cells(
        {
            # nuts has the best mean; hmc is 5% further with little spread: shown within 25%
            "nuts": {"ref_w2": (1.0, 0.0), "test_ll": (-1.0, 0.0), "cost": 10.0},
            "hmc": {"ref_w2": (1.05, 0.02), "test_ll": (-1.0, 0.0), "cost": 2.0},
            # sgld's distances span 0.8 to 1.8: a t-test would call it a tie; it is undecided
            "sgld": {"ref_w2": (1.3, 0.5), "test_ll": (-1.0, 0.0), "cost": 1.0},
            "svi": {"ref_w2": (5.0, 0.0), "test_ll": (-1.5, 0.0), "cost": 1.0},
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert rec.basis is not None and rec.basis.column == "ref_w2"
    assert _grades(rec) == {
        "nuts": Grade.TRUST, "hmc": Grade.AS_GOOD, "sgld": Grade.UNDECIDED, "svi": Grade.WORSE
    }  # fmt: skip
    assert rec.cheapest_as_good is not None and rec.cheapest_as_good.group[0] == "hmc"
    sentence = rec.sentence()
    assert sentence.startswith("Trust nuts/numpyro (W2 to ref. 1 \u00b1 0; n = 3)")
    assert "hmc/numpyro is as good at 1/5 of the cost (1.050 \u00b1 0.012)" in sentence
    assert "undecided (n = 3): sgld/numpyro; more seeds would tell" in sentence
    assert sentence.endswith(f"Ranked on {FIDELITY_WHY}.")
    assert "svi" not in sentence  # worse: neither trusted nor to avoid
    standings = {s.group[0]: s for s in rec.standings}
    hmc = standings["hmc"].comparison
    assert hmc.pairs == 3 and hmc.margin == pytest.approx(np.log(1.25))
    assert hmc.low > 0 and hmc.high < hmc.margin  # a little worse, shown within the margin


def test_a_contestant_far_worse_on_every_seed_is_never_as_good(tmp_path):
    """Sine's committed case: nuts at W2 5.87 ± 0.85 and sghmc at 79 ± 61, 13 times further
    and worse on every seed, which a paired t-test at three seeds called a tie."""
    cells = _cells({"nuts": {"ref_w2": (5.87, 0.85)}, "sghmc": {"ref_w2": (79.0, 60.0)}})
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert _grades(rec)["sghmc"] in (Grade.WORSE, Grade.UNDECIDED)
    assert rec.cheapest_as_good is None and "as good at" not in rec.sentence()


def test_a_cheaper_contestant_that_is_worse_is_not_recommended(tmp_path):
    cells = _cells(
        {
            "nuts": {"ref_w2": (1.0, 0.0), "cost": 10.0},
            "hmc": {"ref_w2": (1.05, 0.02), "cost": 5.0},
            "map": {"ref_w2": (3.0, 0.0), "cost": 0.1},  # cheapest, clearly further away
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert _grades(rec)["map"] == Grade.WORSE
    assert rec.cheapest_as_good.group[0] == "hmc"
    assert "map" not in rec.sentence()


def test_without_a_reference_the_best_held_out_quality_is_trusted():
    cells = _cells(
        {
            "svi": {"test_ll": (-1.0, 0.0), "cost": 1.0},
            "map": {"test_ll": (-3.0, 0.0), "cost": 0.5},
        }
    )
    rec = recommend("sine", cells, [])
    assert rec.basis.column == "test_ll" and "no reference posterior" in rec.basis.why
    assert _grades(rec) == {"svi": Grade.TRUST, "map": Grade.WORSE}
    assert rec.cheapest_as_good is None
    assert rec.sentence().startswith("Trust svi/numpyro (test LL -1 ± 0; n = 3)")


def test_a_reference_without_a_floor_never_decides(tmp_path):
    """Fidelity to a reference without a floor favours nuts and calls map over-confident;
    neither counts: the test LL decides, and map is not avoided on the reference's word."""
    cells = _cells(
        {
            "nuts": {"ref_w2": (1.0, 0.0), "test_ll": (-2.0, 0.0), "ref_std_ratio_out": (1, 0)},
            "map": {"ref_w2": (9.0, 0.0), "test_ll": (-1.0, 0.0), "ref_std_ratio_out": (0.1, 0)},
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=False)])
    assert rec.basis.column == "test_ll"
    assert "the reference has no floor" in rec.basis.why
    assert _grades(rec) == {"map": Grade.TRUST, "nuts": Grade.WORSE}
    passed = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert _grades(passed) == {"nuts": Grade.TRUST, "map": Grade.AVOID}
    assert "map/numpyro (10\u00d7 over-confident out of range)" in passed.sentence()
    standings = {s.group[0]: s for s in passed.standings}
    assert standings["map"].why == "10\u00d7 over-confident out of range"


def test_all_contestants_unusable_trusts_nothing(tmp_path):
    flag = "test log-likelihood below the constant predictor's"
    cells = _cells(
        {
            "sgld": {"ref_w2": (1.0, 0.0), "flags": flag},
            "svi": {"ref_w2": (2.0, 0.0), "status": "diverged"},
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert rec.trusted is None
    assert _grades(rec) == {"sgld": Grade.AVOID, "svi": Grade.AVOID}
    assert rec.sentence() == (
        "Nothing to trust: no contestant could be ranked; avoid sgld/numpyro (worse than a "
        "constant predictor); svi/numpyro (diverged)."
    )


def test_failed_and_reduced_cells_are_not_judged_with_their_reason(tmp_path):
    cells = _cells(
        {
            "nuts": {"ref_w2": (1.0, 0.0)},
            "hmc": {"ref_w2": (0.5, 0.0), "status": "failed"},
            "svi": {"ref_w2": (0.2, 0.0)},
        }
    )
    cells.loc[cells["method"] == "svi", "budget_note"] = "fewer steps"
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert _grades(rec) == {"nuts": Grade.TRUST, "hmc": Grade.NOT_JUDGED, "svi": Grade.NOT_JUDGED}
    assert "not judged: hmc/numpyro (failed); svi/numpyro (reduced budget)" in rec.sentence()
    standings = {s.group[0]: s for s in rec.standings}
    assert standings["hmc"].why == "failed in 3 of 3 cells"
    assert "failed in 3 of 3 cells" in standings["hmc"].number(rec.basis)


@pytest.mark.parametrize("column", ["ref_w2", "test_ll"])
def test_a_clear_winner_has_no_as_good(tmp_path, column):
    worse = (2.0, 0.0) if column == "ref_w2" else (-2.0, 0.0)
    better = (1.0, 0.0) if column == "ref_w2" else (-1.0, 0.0)
    cells = _cells({"nuts": {column: better, "cost": 9.0}, "hmc": {column: worse, "cost": 1.0}})
    refs = [_reference(tmp_path, passed=True)] if column == "ref_w2" else []
    rec = recommend("sine", cells, refs)
    assert _grades(rec) == {"nuts": Grade.TRUST, "hmc": Grade.WORSE}
    assert rec.to_dict()["standings"][0] == {
        "method": "nuts",
        "backend": "numpyro",
        "grade": "trust",
        "value": better[0],
        "se": 0.0,
        "n": 3,
        "cost_s": 9.0,
        "cost_compiled_s": 9.0,
        "floor_ratio": None,
        "as_reference": False,
        "reason": "",
        "flag": "",
    }


def test_contestants_avoided_for_one_reason_are_named_together_with_its_range(tmp_path):
    cells = _cells(
        {
            "nuts": {"ref_w2": (1.0, 0.0), "ref_std_ratio_out": (1.0, 0.0)},
            "map": {"ref_w2": (2.0, 0.0), "ref_std_ratio_out": (0.04, 0.0)},
            "ensemble": {"ref_w2": (2.0, 0.0), "ref_std_ratio_out": (0.25, 0.0)},
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert "avoid map/numpyro, ensemble/numpyro (4\u201325\u00d7 over-confident out of range)" in (
        rec.sentence()
    )


def test_a_split_with_an_infeasible_reference_leaves_the_others_to_decide(tmp_path):
    cells = _cells({"nuts": {"ref_w2": (1.0, 0.0)}, "map": {"ref_w2": (2.0, 0.0)}})
    infeasible = _reference(tmp_path / "none", passed=None, split=1)
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True), infeasible])
    assert rec.basis.column == "ref_w2"
    assert recommend("sine", cells, [infeasible]).basis is None  # no test LL either


def test_the_floor_widens_the_margin_and_the_cheapest_as_good_as_the_reference_is_named(tmp_path):
    """nuts is 0.8 of the floor from the reference, so the floor is 1.25: distances one floor
    apart cannot be told, and the margin against nuts is 1 + 1.25 / 1 = 2.25x, not 1.25x.
    hmc at 1.8x nuts's distance is as good with the floor (worse without it) but 1.44x the
    floor: not shown as good as the reference; sgld is both, and the cheapest."""
    groups = {
        "nuts": {"ref_w2": (1.0, 0.0), "ref_floor_ratio": (0.8, 0.0), "cost": 10.0},
        "hmc": {"ref_w2": (1.8, 0.02), "ref_floor_ratio": (1.44, 0.02), "cost": 2.0},
        "sgld": {"ref_w2": (1.1, 0.01), "ref_floor_ratio": (0.88, 0.01), "cost": 0.5},
        "svi": {"ref_w2": (5.0, 0.0), "ref_floor_ratio": (4.0, 0.0), "cost": 1.0},
    }
    rec = recommend("sine", _cells(groups), [_reference(tmp_path, passed=True)])
    assert _grades(rec) == {
        "nuts": Grade.TRUST, "hmc": Grade.AS_GOOD, "sgld": Grade.AS_GOOD, "svi": Grade.WORSE
    }  # fmt: skip
    standings = {s.group[0]: s for s in rec.standings}
    assert standings["hmc"].comparison.margin == pytest.approx(np.log(2.25))
    assert {k for k, s in standings.items() if s.as_reference} == {"nuts", "sgld"}
    sentence = rec.sentence()
    assert "sgld/numpyro is as good at 1/20 of the cost" in sentence
    assert (
        "As good as the reference (within 1.25\u00d7 its floor) for the least: sgld/numpyro, "
        "0.500 s." in sentence
    )
    assert standings["svi"].against_floor == "4\u00d7 the floor"
    # Without the floor the margin is 1.25x: hmc is worse.
    no_floor = {
        k: {c: v for c, v in g.items() if c != "ref_floor_ratio"} for k, g in groups.items()
    }
    plain = recommend("sine", _cells(no_floor), [_reference(tmp_path, passed=True)])
    assert _grades(plain)["hmc"] == Grade.WORSE
    assert not any(s.as_reference for s in plain.standings)
    # A wider stated margin takes hmc within the floor too.
    wide = recommend("sine", _cells(groups), [_reference(tmp_path, passed=True)], Margins(3.0))
    assert {s.group[0] for s in wide.standings if s.as_reference} == {"nuts", "hmc", "sgld"}
    assert wide.to_dict()["margins"] == {"fidelity_ratio": 3.0, "test_ll_nats": 0.05}


def test_where_none_is_as_good_as_the_reference_the_closest_and_its_gap_are_named(tmp_path):
    groups = {
        "nuts": {"ref_w2": (1.0, 0.0), "ref_floor_ratio": (2.0, 0.0)},
        "svi": {"ref_w2": (5.0, 0.0), "ref_floor_ratio": (10.0, 0.0)},
    }
    rec = recommend("sine", _cells(groups), [_reference(tmp_path, passed=True)])
    assert (
        "None is shown as good as the reference (within 1.25\u00d7 its floor); the closest, "
        "nuts/numpyro, is 2\u00d7 the floor." in rec.sentence()
    )


def test_a_closest_inside_the_margin_on_average_but_not_shown_asks_for_more_seeds(tmp_path):
    """0.9x the floor on average, but too spread over three seeds for the upper bound to fall
    inside 1.25x: not "as good as the reference", and the sentence says why."""
    groups = {"nuts": {"ref_w2": (1.0, 0.5), "ref_floor_ratio": (0.9, 0.5)}}
    rec = recommend("sine", _cells(groups), [_reference(tmp_path, passed=True)])
    assert not any(s.as_reference for s in rec.standings)
    assert (
        "the closest, nuts/numpyro, is 0.90\u00d7 the floor on average, which n = 3 cannot "
        "show: more seeds would tell." in rec.sentence()
    )


def test_contestants_within_the_floor_are_said_to_be_indistinguishable(tmp_path):
    """A mean ratio to the floor of at most 1 reads "indistinguishable from the reference", for
    the trusted contestant and for those shown as good; beyond it, its multiple of the floor."""
    cells = _cells(
        {
            "nuts": {"ref_w2": (1.0, 0.0), "ref_floor_ratio": (0.8, 0.0), "cost": 10.0},
            "hmc": {"ref_w2": (1.05, 0.02), "ref_floor_ratio": (0.84, 0.0), "cost": 2.0},
            "sgld": {"ref_w2": (1.02, 0.01), "ref_floor_ratio": (0.82, 0.0), "cost": 20.0},
            "mclmc": {"ref_w2": (1.9, 0.01), "ref_floor_ratio": (1.5, 0.0), "cost": 30.0},
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert _grades(rec) == {
        "nuts": Grade.TRUST, "hmc": Grade.AS_GOOD, "sgld": Grade.AS_GOOD, "mclmc": Grade.AS_GOOD,
    }  # fmt: skip
    assert rec.sentence().startswith(
        "Trust nuts/numpyro (W2 to ref. 1 \u00b1 0, indistinguishable from the reference; "
        "n = 3); hmc/numpyro is as good at 1/5 of the cost (1.050 \u00b1 0.012, "
        "indistinguishable from the reference; 2 more as good (sgld/numpyro indistinguishable "
        "from the reference))."
    )
    standings = {s.group[0]: s for s in rec.standings}
    assert standings["mclmc"].against_floor == "1.5\u00d7 the floor"
    assert rec.to_dict()["standings"][0]["floor_ratio"] == pytest.approx(0.8)
    # Without a floor (test LL decides), no standing carries a ratio.
    cells["test_ll"] = -1.0
    without = recommend("sine", cells, [_reference(tmp_path, passed=False)])
    assert all(np.isnan(s.floor_ratio) for s in without.standings)


def test_a_trusted_sampler_whose_chains_disagree_says_so_on_its_line(tmp_path):
    cells = _cells(
        {
            "nuts": {"ref_w2": (1.0, 0.0), "rhat_max": (1.04, 0.0)},
            "svi": {"ref_w2": (5.0, 0.0)},
        }
    )
    rec = recommend("sine", cells, [_reference(tmp_path, passed=True)])
    assert rec.sentence().startswith(
        "Trust nuts/numpyro (W2 to ref. 1 \u00b1 0; n = 3; chains disagree (R\u0302 up to 1.04))"
    )


def test_cost_is_given_without_and_with_compilation(tmp_path):
    cells = _cells({"nuts": {"ref_w2": (1.0, 0.0), "cost": 10.0, "compile": 4.0}})
    (nuts,) = recommend("sine", cells, [_reference(tmp_path, passed=True)]).standings
    assert nuts.number(None) == "6 s (10 s with compilation)"


def test_bad_margins_are_refused_by_name():
    with pytest.raises(
        ValueError, match=r"fidelity_ratio must be a finite ratio above 1, got 1\.0"
    ):
        Margins(fidelity_ratio=1.0)
    with pytest.raises(ValueError, match=r"test_ll_nats must be finite and positive, got -0\.1"):
        Margins(test_ll_nats=-0.1)
    with pytest.raises(ValueError, match=r"unknown margin\(s\) ratio; available: fidelity_ratio"):
        Margins.of({"ratio": 2.0})
