"""The Summary: the Pareto front, each dataset's recommendation and its evidence table, from
stored results."""

from __future__ import annotations

import math
import re
from html import unescape

import pandas as pd

from ppl_bnn.report.summary import Point, pareto_front, points
from tests.report.helpers import section, tables


def _point(name: str, cost: float, quality: float, eligible: bool = True) -> Point:
    return Point((name, "x"), cost, math.nan, 0.0, quality, math.nan, eligible)


def test_pareto_front_keeps_what_nothing_cheaper_beats() -> None:
    pts = [
        _point("cheap", 1.0, 5.0),
        _point("dominated", 2.0, 6.0),  # dearer than cheap and worse (lower is better)
        _point("better", 3.0, 2.0),
        _point("best", 10.0, 1.0),
        _point("not-ranked", 0.5, 0.1, eligible=False),
    ]
    assert [p.group[0] for p in pareto_front(pts, lower=True)] == ["cheap", "better", "best"]
    assert [p.group[0] for p in pareto_front(pts, lower=False)] == ["cheap", "dominated"]


def test_summary_comes_first_with_each_datasets_recommendation_and_evidence(html: str) -> None:
    assert re.findall(r'<section id="([^"]+)">\s*<h2', html)[0] == "summary"
    sine = section(html, "summary-sine")
    text = unescape(re.sub(r"<[^>]+>", "", sine))
    assert "Reference posterior: split 0: NumPyro NUTS, 2 chains" in text
    assert "not converged" in text
    # The reference did not converge: the test LL decides, and the sentence says so. Which tie
    # is the cheapest depends on measured fit times: only its form is checked.
    sentence = re.search(r"Recommendation: (.*?converge\)\.)", text).group(1)
    assert re.fullmatch(
        r"Trust nuts/numpyro \(test LL 0\.449\); \S+/\w+ ties with it at (1/\d+ of|[\d.]+\u00d7) "
        r"the cost \([^;]+; 2 more tie\); avoid sgld/numpyro \(diverged\); map/pyro \(worse "
        r"than a constant predictor\); not judged: nuts/pyro \(failed\)\. Ranked on held-out "
        r"test log-likelihood \(the reference did not converge\)\.",
        sentence,
    ), sentence
    (evidence,) = tables(sine)
    assert evidence[0] == [
        "standing", "method", "backend", "W2 to ref.", "test LL", "cov 95%",
        "std / ref. std out of range", "cost s", "flags",
    ]  # fmt: skip
    assert [row[:3] for row in evidence[1:]] == [
        ["trust", "nuts", "numpyro"],
        ["as good", "map", "numpyro"],
        ["as good", "ensemble", "numpyro"],
        ["as good", "svi", "pyro"],
        ["avoid", "map", "pyro"],
        ["avoid", "sgld", "numpyro"],
        ["not judged", "nuts", "pyro"],
    ]
    flags = {tuple(row[1:3]): row[-1] for row in evidence[1:]}
    assert flags[("nuts", "numpyro")] == "chains not converged (R\u0302 up to 1.08)"
    assert flags[("map", "pyro")] == "worse than a constant predictor in 1 of 1 cells"
    assert flags[("sgld", "numpyro")] == "diverged in 1 of 1 cells"
    assert flags[("nuts", "pyro")] == "failed in 1 of 1 cells; reduced budget \u2020"
    assert 'id="fig-sine-summary-front"' in sine
    blobs = unescape(re.sub(r"<[^>]+>", "", section(html, "summary-blobs")))
    assert "split 0: NumPyro NUTS" in blobs and "converged" in blobs
    # Split 1's reference is infeasible; split 0's converged: fidelity decides. Classification
    # cells have no test_ll column of their own: -NLL stands in.
    assert "Trust svi/pyro (TV to ref. 0.0736). Ranked on fidelity to a converged" in blobs
    assert tables(section(html, "summary-blobs"))[0][0][3:5] == ["TV to ref.", "test LL"]


def test_a_tuned_contestants_cost_includes_its_tuning() -> None:
    cells = pd.DataFrame(
        {
            "method": ["map", "map (tuned)"],
            "backend": ["numpyro", "numpyro"],
            "status": ["ok", "ok"],
            "test_ll": [-3.0, -2.0],
            "time_total": [5.0, 5.0],
            "time_compile": [1.0, 1.0],
            "time_tuning": [math.nan, 30.0],
        }
    )
    cost = {p.group[0]: p.cost for p in points(cells, "test_ll")}
    assert cost == {"map": 4.0, "map (tuned)": 34.0}
