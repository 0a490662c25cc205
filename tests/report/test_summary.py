"""The Summary: the Pareto front, the verdict sentences and the failures, from stored results."""

from __future__ import annotations

import math
import re

import pandas as pd

from ppl_bnn.report.summary import Point, pareto_front, points
from tests.report.helpers import section


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


def test_summary_comes_first_and_names_front_and_failures(html: str) -> None:
    assert re.findall(r'<section id="([^"]+)">\s*<h2', html)[0] == "summary"
    sine = section(html, "summary-sine")
    text = re.sub(r"<[^>]+>", "", sine)
    assert "Reference posterior: split 0: NumPyro NUTS, 2 chains" in text
    assert "not converged" in text
    assert "Pareto front of test LL near zero against cost" in text
    assert "Pareto front of test LL far against cost" in text
    assert "Unusable (worse than a constant predictor), left out" in text
    assert "map/pyro (1 of 1 cells; test LL near zero below the constant&#x27;s)" in sine
    assert "Failed: nuts/pyro (1 of 1 cells)" in text
    assert "Diverged: sgld/numpyro (1 of 1 cells)" in text
    assert "Reduced budget, marked † and never ranked: nuts/pyro" in text
    assert 'id="fig-sine-summary-front"' in sine
    blobs = re.sub(r"<[^>]+>", "", section(html, "summary-blobs"))
    assert "split 0: NumPyro NUTS" in blobs and "converged" in blobs
    # Classification cells have no test_ll column of their own: -NLL stands in.
    assert "Pareto front of test LL (-NLL) against cost: svi/pyro" in blobs


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
