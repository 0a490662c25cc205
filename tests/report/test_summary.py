"""The Summary: the Pareto front, each dataset's recommendation and its evidence table, from
stored results."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from pathlib import Path

import pandas as pd

from ppl_bnn.report import tables as report_tables
from ppl_bnn.report.answer import recommendations
from ppl_bnn.report.document import Document, Strong
from ppl_bnn.report.fidelity import with_fidelity
from ppl_bnn.report.html import render_html
from ppl_bnn.report.load import SuiteResults, load_results
from ppl_bnn.report.markdown import render_markdown
from ppl_bnn.report.recommend import Recommendation
from ppl_bnn.report.summary import TEST_ONLY, Point, pareto_front, points, summary_section
from ppl_bnn.report.tables import NOT_RANKED, RANKING_NOTE, TIE_MARK
from tests.report.builder import subset
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
    assert "not converged" in text and NOT_RANKED in text
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
    # Its reference failed the gate: no fidelity column, the out-of-range std is the fit's own.
    assert evidence[0] == [
        "standing", "method", "backend", "test LL", "cov 95%", "epist. std _out/_in", "cost s",
        "flags",
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


#: The diagnostics the tiny suite's sine reference stores (:func:`tests.report.builder.build`).
FAILED_GATE = {"rhat_max": 1.08, "ess_bulk_min": 31}


def _sine(results_dir: Path, folder: Path, references: bool) -> Path:
    """The tiny suite's sine contestants (not its study), with the references or without."""
    return subset(
        results_dir,
        folder,
        lambda r: r["config"]["dataset"] == "sine" and r["config"].get("sweep") is None,
        references,
    )


def _gate(folder: Path, converged: bool) -> None:
    """Make sine's split-0 reference pass its gate, or fail it as the builder wrote it."""
    path = folder / "references" / "sine-split0" / "reference.json"
    entry = json.loads(path.read_text())
    diagnostics = {"rhat_max": 1.004, "ess_bulk_min": 820} if converged else FAILED_GATE
    path.write_text(json.dumps({**entry, "converged": converged, "diagnostics": diagnostics}))


def _summary(folder: Path) -> tuple[SuiteResults, Recommendation, str, str, str]:
    """Sine's results, recommendation and Summary subsection: its HTML, that HTML's text and
    its Markdown."""
    results = with_fidelity(load_results(folder))
    recs = recommendations(results)
    document = Document("Benchmark report", "", [summary_section(results, recs)])
    html = section(render_html(document), "summary-sine")
    markdown = render_markdown(document)
    text = unescape(re.sub(r"<[^>]+>", "", html))
    return results, recs["sine"], html, text, markdown[markdown.index("### sine") :]


def test_a_gate_failing_reference_turns_the_summary_from_ranked_to_not_ranked(
    results_dir: Path, tmp_path: Path
) -> None:
    folder = _sine(results_dir, tmp_path / "results", references=True)
    _gate(folder, converged=True)
    _, rec, html, text, markdown = _summary(folder)
    # Converged: fidelity ranks the contestants, heads the evidence and is a panel of the front.
    assert rec.basis is not None and rec.basis.column == "ref_w2"
    assert "Ranked on fidelity to a converged reference." in text
    assert NOT_RANKED not in text and NOT_RANKED not in markdown
    assert "converged (R\u0302 max 1.004, bulk ESS min 820)" in text
    header = tables(html)[0][0]
    assert header[3:5] == ["W2 to ref.", "test LL"] and "std / ref. std out of range" in header
    assert "(panels: W2 to ref.; test LL near zero; test LL far)" in text

    _gate(folder, converged=False)
    _, rec, html, text, markdown = _summary(folder)
    # The same results, the reference failing its gate: fidelity ranks nothing, the Summary
    # says so with the gate's numbers and what to try, and the front is test LL and cost.
    assert rec.basis is not None and rec.basis.column == "test_ll"
    for shown in (text, markdown):
        assert NOT_RANKED in shown
        assert "Ranked on fidelity" not in shown and "W2 to ref." not in shown
    assert "(R\u0302 max 1.080, bulk ESS min 31; gate R\u0302 \u2264 1.01, ESS \u2265 400)" in text
    assert f"Fidelity {NOT_RANKED}. {TEST_ONLY.capitalize()};" in text
    assert "more warmup (num_warmup, now 50) or a longer tree (max_tree_depth, now 10)" in text
    assert "or a smaller network." in text
    assert "Ranked on held-out test log-likelihood (the reference did not converge)." in text
    header = tables(html)[0][0]
    assert not any("ref." in h for h in header), header
    assert "(panels: test LL near zero; test LL far)" in text


def test_distances_to_a_gate_failing_reference_are_shown_apart_and_not_ranked(
    results_dir: Path, tmp_path: Path
) -> None:
    folder = _sine(results_dir, tmp_path / "results", references=True)
    _gate(folder, converged=True)
    results = with_fidelity(load_results(folder))
    main = report_tables.dataset_table(results, "sine")
    assert main is not None and "W2 to ref." in main.header
    ranked = report_tables.fidelity_table(results, "sine")
    assert ranked is not None and ranked.caption.endswith(RANKING_NOTE)

    _gate(folder, converged=False)
    results = with_fidelity(load_results(folder))
    main = report_tables.dataset_table(results, "sine")
    assert main is not None and not any("ref." in h for h in main.header), main.header
    assert "NOT CONVERGED" in main.caption and "Against the reference posterior" in main.caption
    apart = report_tables.fidelity_table(results, "sine")
    assert apart is not None and "W2 to ref." in apart.header
    assert apart.caption.startswith(f"{NOT_RANKED.capitalize()}. The reference of split(s) 0")
    assert RANKING_NOTE not in apart.caption
    cells = [c for row in apart.rows for c in row]
    assert not any(isinstance(c, Strong) or TIE_MARK in str(c) for c in cells)


def test_without_a_reference_the_front_and_the_ranking_use_test_ll_and_cost(
    results_dir: Path, tmp_path: Path
) -> None:
    folder = _sine(results_dir, tmp_path / "results", references=False)
    _, rec, _, text, markdown = _summary(folder)
    assert rec.basis is not None and rec.basis.column == "test_ll"
    sentence = (
        "No reference posterior: the suite computes none, so fidelity is not shown; the front "
        "and the ranking use test log-likelihood and cost alone."
    )
    assert sentence in text and sentence in markdown
    assert "(panels: test LL near zero; test LL far)" in text
    assert NOT_RANKED not in text
