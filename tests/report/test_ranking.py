"""Best only when a paired t-test at the 5% level tells the lead from zero; ties otherwise;
only eligible groups ranked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppl_bnn.report.load import _sort_text
from ppl_bnn.report.ranking import (
    clear,
    critical_value,
    eligible_groups,
    paired_difference,
    rank,
    scores,
)


def _cells(values: dict[tuple[str, str], list[float]], column: str = "test_ll") -> pd.DataFrame:
    rows = []
    for (method, backend), vals in values.items():
        for seed, v in enumerate(vals):
            rows.append(
                {"method": method, "backend": backend, "split": 0, "seed": seed, "status": "ok",
                 column: v}
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_paired_difference_is_mean_and_standard_error_of_differences() -> None:
    cells = _cells({("a", "x"): [1.0, 2.0, 4.0], ("b", "x"): [0.5, 1.0, 1.5]})
    d = np.array([0.5, 1.0, 2.5])
    mean, se, n = paired_difference(cells, cells["test_ll"], ("a", "x"), ("b", "x"))
    assert (mean, n) == (pytest.approx(d.mean()), 3)
    assert se == pytest.approx(d.std(ddof=1) / np.sqrt(3))


def test_clear_lead_is_best() -> None:
    # Seed effects shared by both (paired), a constant lead of 1: far beyond the noise.
    shared = [0.0, 3.0, -2.0, 1.0]
    cells = _cells(
        {("a", "x"): [s + 1.0 + 0.01 * i for i, s in enumerate(shared)], ("b", "x"): shared}
    )
    verdict = rank(cells, "test_ll")
    assert verdict.best == ("a", "x") and verdict.runner_up == ("b", "x")
    assert verdict.lead == pytest.approx(1.015) and verdict.pairs == 4


def test_lead_inside_the_noise_is_a_tie() -> None:
    cells = _cells({("a", "x"): [1.0, -1.0, 2.0], ("b", "x"): [0.0, 0.5, 1.0]})
    verdict = rank(cells, "test_ll")  # differences 1, -1.5, 1: mean 0.17, se 0.83
    assert verdict.best is None
    assert verdict.tied == {("a", "x"), ("b", "x")}


def test_critical_value_is_the_student_t_quantile() -> None:
    # Two-sided 5% points of Student's t from the standard tables.
    assert critical_value(2) == pytest.approx(12.706, abs=1e-3)
    assert critical_value(3) == pytest.approx(4.303, abs=1e-3)
    assert critical_value(20) == pytest.approx(2.093, abs=1e-3)
    assert critical_value(1) == critical_value(0) == np.inf
    assert clear(-1.0, 0.1, 3) and not clear(0.4, 0.1, 3) and not clear(1.0, np.nan, 3)


def test_three_standard_errors_over_three_replicates_is_a_tie() -> None:
    # Differences 2, 3, 4: mean 3, se 1/sqrt(3): a lead of 5.2 se passes t(2) = 4.30 ...
    cells = _cells({("a", "x"): [2.0, 3.0, 4.0], ("b", "x"): [0.0, 0.0, 0.0]})
    assert rank(cells, "test_ll").best == ("a", "x")
    # ... differences 1, 2, 4: mean 2.33, se 0.88, a lead of 2.6 se (a win at 2 se) does not.
    cells = _cells({("a", "x"): [1.0, 2.0, 4.0], ("b", "x"): [0.0, 0.0, 0.0]})
    verdict = rank(cells, "test_ll")
    assert verdict.best is None and verdict.tied == {("a", "x"), ("b", "x")}
    assert verdict.lead / verdict.lead_se == pytest.approx(2.65, abs=0.01)


def test_one_replicate_never_makes_a_winner() -> None:
    cells = _cells({("a", "x"): [5.0], ("b", "x"): [1.0], ("c", "x"): [0.0]})
    verdict = rank(cells, "test_ll")
    assert verdict.best is None and verdict.tied == {("a", "x"), ("b", "x"), ("c", "x")}


def test_lower_and_nominal_directions() -> None:
    rmse = _cells({("a", "x"): [1.0, 1.1, 0.9], ("b", "x"): [2.0, 2.1, 1.9]}, "rmse")
    assert rank(rmse, "rmse").best == ("a", "x")
    coverage = _cells(
        {("a", "x"): [0.94, 0.96, 0.95], ("b", "x"): [0.99, 0.995, 1.0]}, "coverage_95"
    )
    assert list(scores(coverage, "coverage_95")[:1]) == [pytest.approx(-0.01)]
    assert rank(coverage, "coverage_95").best == ("a", "x")
    assert rank(coverage.assign(x=1.0), "x") is None  # no direction: not ranked


def test_flagged_failed_and_reduced_groups_are_not_eligible() -> None:
    cells = _cells(
        {("a", "x"): [9.0, 9.0], ("b", "x"): [1.0, 1.1], ("c", "x"): [0.0, 0.2], ("d", "x"): [8, 8]}
    )
    cells["flags"] = None
    cells["budget_note"] = None
    cells.loc[(cells["method"] == "a") & (cells["seed"] == 1), "flags"] = "test LL below ..."
    cells.loc[cells["method"] == "d", "budget_note"] = "1 chain"
    failed = cells.iloc[[0]].assign(method="e", status="failed", test_ll=np.nan)
    cells = pd.concat([cells, failed], ignore_index=True)
    assert eligible_groups(cells) == {("b", "x"), ("c", "x")}
    # a (one flagged cell) and d (reduced budget) score higher, but only b and c are ranked.
    assert rank(cells, "test_ll").best == ("b", "x")


def test_rows_sort_methods_canonically_tuned_after_their_method_and_methodless_rows_last() -> None:
    names = [None, "map (tuned)", "svi", "map", "numpyro"]
    ordered = sorted(names, key=_sort_text)
    assert ordered.index("map") + 1 == ordered.index("map (tuned)")
    assert ordered.index("svi") < ordered.index("map") and ordered[-1] is None
