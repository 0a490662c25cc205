"""``seeds = "auto"`` (:mod:`ppl_bnn.bench.auto_seeds`): which contestants get another seed, and
a sweep that adds them round by round, records them as the suite's and resumes without
rerunning them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from ppl_bnn.bench import auto_seeds
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.bench.suite import AUTO_CAP, SuiteError
from ppl_bnn.bench.suite_file import current_configs
from ppl_bnn.report.load import load_results
from ppl_bnn.report.recommend import Grade, Recommendation, Standing
from tests.bench.conftest import FAST_SVI, tiny_suite

pytestmark = pytest.mark.runtime(60)  # seconds on 2 cores: started first (tests/conftest.py)


def _rec(grades: dict[str, Grade]) -> Recommendation:
    standings = tuple(Standing((method, "numpyro"), grade) for method, grade in grades.items())
    return Recommendation("sine", None, standings)


def test_the_undecided_and_the_trusted_get_the_next_seed_up_to_the_cap():
    recs = {
        "sine": _rec(
            {
                "nuts": Grade.TRUST,
                "svi": Grade.UNDECIDED,
                "map": Grade.AS_GOOD,
                "sgld": Grade.WORSE,
                "swag": Grade.AVOID,
            }
        ),
        "gap": dataclasses.replace(_rec({"nuts": Grade.TRUST, "map": Grade.WORSE}), dataset="gap"),
    }
    seeds = {("sine", "nuts", "numpyro"): {0, 1, 2}, ("sine", "svi", "numpyro"): {0, 2, 1, 3}}
    assert auto_seeds.seeds_to_add(recs, seeds, 10) == {
        ("sine", "nuts", "numpyro"): 3,
        ("sine", "svi", "numpyro"): 4,
    }  # gap has nothing undecided: no more seeds there
    assert auto_seeds.seeds_to_add(recs, seeds, 4) == {("sine", "nuts", "numpyro"): 3}


def test_a_suite_with_auto_seeds_starts_at_three_and_lists_every_seed_up_to_the_cap():
    suite = tiny_suite(seeds="auto")
    assert suite.seeds == (0, 1, 2) and suite.auto_seeds == AUTO_CAP
    assert {c.seed for c in suite.cells()} == {0, 1, 2}
    configs = current_configs(suite, None)
    assert {int(cid.rsplit("seed", 1)[1]) for cid in configs} == set(range(AUTO_CAP))
    with pytest.raises(SuiteError, match="seeds must be a list of seeds or \"auto\", got 'many'"):
        tiny_suite(seeds="many")


def test_a_sweep_adds_seeds_to_the_undecided_until_the_cap_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jax_cache: str
) -> None:
    """The verdict is stood in for (svi trusted, map undecided, whatever the fits), so that the
    rounds are what is tested: one round at a cap of 4 seeds, then none."""
    suite = dataclasses.replace(
        tiny_suite(seeds="auto", methods={"svi": dict(FAST_SVI), "map": {"num_steps": 50}}),
        auto_seeds=4,
    )
    verdicts = []

    def verdict(results):
        verdicts.append(sorted(results.cells["seed"]))
        return {"sine": _rec({"svi": Grade.TRUST, "map": Grade.UNDECIDED})}

    monkeypatch.setattr(auto_seeds, "recommendations", verdict)
    results = tmp_path / "results"
    summary = run_suite(suite, results, jobs=2, jax_cache=jax_cache)
    assert summary.ok and sum(summary.ran.values()) == 8
    assert verdicts == [[0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2, 3, 3]]
    listed = json.loads((results / "suite.json").read_text())["cells"]
    assert sorted((c["method"], c["seed"]) for c in listed) == sorted(
        (m, s) for m in ("svi", "map") for s in range(4)
    )
    loaded = load_results(results)
    assert loaded.problems == [] and len(loaded.cells) == 8
    assert pd.Series(loaded.cells["seed"]).max() == 3
    again = run_suite(suite, results, jobs=2, jax_cache=jax_cache)
    assert sum(again.ran.values()) == 0 and again.skipped == 8
