"""The Summary: the Pareto front, each dataset's recommendation and its evidence table, from
stored results."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from pathlib import Path

import pandas as pd
import pytest

from ppl_bnn.reference import write_reference
from ppl_bnn.report import fmt
from ppl_bnn.report import tables as report_tables
from ppl_bnn.report.answer import recommendations
from ppl_bnn.report.document import Document, Strong
from ppl_bnn.report.fidelity import FLOOR_RATIO, with_fidelity
from ppl_bnn.report.fmt import INDISTINGUISHABLE
from ppl_bnn.report.html import render_html
from ppl_bnn.report.load import SuiteResults, load_results
from ppl_bnn.report.markdown import render_markdown
from ppl_bnn.report.recommend import FIDELITY_WHY, Recommendation
from ppl_bnn.report.reference_tables import NOT_RANKED, reference_info_table
from ppl_bnn.report.summary import Point, pareto_front, points, summary_section
from ppl_bnn.report.tables import RANKING_NOTE, TIE_MARK
from tests.report.builder import reference_entry, subset
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


def test_summary_comes_first_with_each_datasets_recommendation_and_evidence(
    html: str, results_dir: Path
) -> None:
    assert re.findall(r'<section id="([^"]+)">\s*<h2', html)[0] == "summary"
    sine = section(html, "summary-sine")
    text = unescape(re.sub(r"<[^>]+>", "", sine))
    # Its two NUTS chains are too few for a floor: not ranked, with why and what to try.
    assert (
        f"{NOT_RANKED.capitalize()} (2 of 2 chains kept, fewer than the 4 a floor needs); ranked "
        "on held-out test log-likelihood instead" in text
    )
    assert "Try more chains (num_chains, now 2) or a longer warm-up (num_warmup, now 50)." in text
    # The reference has no floor: the test LL decides, and the sentence says so. One seed per
    # contestant shows nothing equivalent: the others are undecided, not tied.
    sentence = re.search(r"Recommendation: (.*?no floor\)\.)", text).group(1)
    assert re.fullmatch(
        r"Trust nuts/numpyro \(test LL 0\.449; n = 1; chains disagree \(R\u0302 up to [\d.]+\)\); "
        r"undecided \(n = 1\): map/numpyro, ensemble/numpyro, svi/pyro; more seeds would tell; "
        r"avoid sgld/numpyro \(diverged\); map/pyro \(worse than a constant predictor\); not "
        r"judged: nuts/pyro \(failed\)\. Ranked on held-out test log-likelihood \(the reference "
        r"has no floor\)\.",
        sentence,
    ), sentence
    assert "floor" not in sentence.split(". Ranked")[0]  # no distance, so no "k\u00d7 the floor"
    (evidence,) = tables(sine)
    # Its reference failed the gate: no fidelity column, the out-of-range std is the fit's own.
    assert evidence[0] == [
        "standing", "method", "backend", "test LL", "cov 95%", "epist. std _out/_in", "cost s",
        "flags",
    ]  # fmt: skip
    assert [row[:3] for row in evidence[1:]] == [
        ["trust", "nuts", "numpyro"],
        ["undecided", "map", "numpyro"],
        ["undecided", "ensemble", "numpyro"],
        ["undecided", "svi", "pyro"],
        ["avoid", "map", "pyro"],
        ["avoid", "sgld", "numpyro"],
        ["not judged", "nuts", "pyro"],
    ]
    flags = {tuple(row[1:3]): row[-1] for row in evidence[1:]}
    assert flags[("nuts", "numpyro")] == "chains disagree (R\u0302 up to 1.08)"
    assert flags[("map", "pyro")] == "worse than a constant predictor in 1 of 1 cells"
    assert flags[("sgld", "numpyro")] == "diverged in 1 of 1 cells"
    assert flags[("nuts", "pyro")] == "failed in 1 of 1 cells; reduced budget \u2020"
    assert 'id="fig-sine-summary-front"' in sine
    blobs = unescape(re.sub(r"<[^>]+>", "", section(html, "summary-blobs")))
    # Split 1's reference is infeasible; split 0's has a floor: fidelity decides, each distance
    # beside the floor. Classification cells have no test_ll column of their own: -NLL stands in.
    floor = load_results(results_dir).references[("blobs", 0)].floor
    assert floor is not None
    assert (
        "Reference posterior: a chain ensemble of 6 NUTS chains from deep-ensemble starts (5 "
        f"kept; 1 dropped, frozen), floor TV {fmt.number(floor, 2)}, sampled in 3.25 s (reached "
        "the target floor); across-chain R-hat" in blobs
    )
    assert "measures how multimodal the posterior is, not convergence." in blobs
    tv = with_fidelity(load_results(results_dir)).cells.set_index("cell_id")
    k = tv.loc["blobs-split0-svi-pyro-seed0", "ref_tv"] / floor
    assert k > 1
    assert (
        f"Trust svi/pyro (TV to ref. 0.0736, {fmt.number(k, 2)}\u00d7 the floor; n = 1). None is "
        "shown as good as the reference (within 1.25\u00d7 its floor); the closest, svi/pyro, is "
        f"{fmt.number(k, 2)}\u00d7 the floor (n = 1: more seeds would tell). Ranked on "
        f"{FIDELITY_WHY}." in blobs
    )
    evidence = tables(section(html, "summary-blobs"))[0]
    assert evidence[0][3:5] == ["TV to ref.", "test LL"]
    assert evidence[1][3] == f"0.0736 ({fmt.number(k, 2)}\u00d7 the floor)"


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


def _sine(results_dir: Path, folder: Path, references: bool) -> Path:
    """The tiny suite's sine contestants (not its study), with the references or without."""
    return subset(
        results_dir,
        folder,
        lambda r: r["config"]["dataset"] == "sine" and r["config"].get("sweep") is None,
        references,
    )


#: The settings of the chain ensemble :func:`_ensemble` writes.
ENSEMBLE = {"engine": "mclmc", "num_chains": 16, "num_warmup": 2000, "num_samples": 500}


def _ensemble(folder: Path, kept: int, floor: float | None = None) -> None:
    """Make sine's split-0 reference a chain ensemble of 16 MCLMC chains, ``kept`` of them kept,
    with W2 floor ``floor`` (its standardised floor half of it), through the gate of
    :func:`ppl_bnn.reference.reference_document`; its record says why it stopped and which
    chains it dropped."""
    reference = folder / "references" / "sine-split0"
    found: dict[str, float] = {
        "chains_run": 16, "chains_kept": kept, "rhat_across": 1.27, "rhat_within_median": 1.004,
        "ess_within_median": 412,
    }  # fmt: skip
    if floor is not None:
        found.update(floor_w2=floor, floor_w2_std=floor / 2, floor_w2_random=floor / 4,
                     floor_w2_std_random=floor / 8)  # fmt: skip
    write_reference(reference, reference_entry("sine", 0, found, settings=ENSEMBLE))
    dropped = {str(c): f"frozen: step size 1e-09 (median 0.{c})" for c in range(kept, 16)}
    info = {"stopped": "reached the target floor", "sampling_seconds": 412.0,
            "chains": {"dropped": dropped}}  # fmt: skip
    (reference / "record.json").write_text(json.dumps({"status": "ok", "info": info}))


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


def _distance(results: SuiteResults, method: str, backend: str) -> float:
    """The W2 of a sine contestant's split-0 cell to the reference."""
    cells = results.cells.set_index("cell_id")
    return float(cells.loc[f"sine-split0-{method}-{backend}-seed0", "ref_w2"])


def test_a_reference_without_a_floor_turns_the_summary_from_ranked_to_not_ranked(
    results_dir: Path, tmp_path: Path
) -> None:
    folder = _sine(results_dir, tmp_path / "results", references=True)
    _ensemble(folder, kept=16, floor=0.05)
    _, rec, html, text, markdown = _summary(folder)
    # A floor: fidelity ranks the contestants, heads the evidence and is a panel of the front.
    assert rec.basis is not None and rec.basis.column == "ref_w2"
    assert f"Ranked on {FIDELITY_WHY}." in text
    assert NOT_RANKED not in text and NOT_RANKED not in markdown
    header = tables(html)[0][0]
    assert header[3:5] == ["W2 to ref.", "test LL"] and "std / ref. std out of range" in header
    assert "(panels: W2 to ref.; test LL near zero; test LL far)" in text

    # The same results, 3 of 16 chains kept: no floor. Fidelity ranks nothing, the Summary says
    # so with why and what to try, and the ranking and the front are test LL and cost.
    _ensemble(folder, kept=3)
    _, rec, html, text, markdown = _summary(folder)
    assert rec.basis is not None and rec.basis.column == "test_ll"
    why = (
        f"{NOT_RANKED.capitalize()} (3 of 16 chains kept, fewer than the 4 a floor needs); "
        "ranked on held-out test log-likelihood instead"
    )
    remedy = "Try more chains (num_chains, now 16) or a longer warm-up (num_warmup, now 2000)."
    for shown in (text, markdown.replace("**", "").replace("\\_", "_")):
        assert why in shown and remedy in shown
        assert "Ranked on held-out test log-likelihood (the reference has no floor)." in shown
        assert "Ranked on fidelity" not in shown and "W2 to ref." not in shown
        assert "the floor" not in shown and INDISTINGUISHABLE not in shown
    header = tables(html)[0][0]
    assert not any("ref." in h for h in header), header
    assert "(panels: test LL near zero; test LL far)" in text


def test_each_distance_is_shown_beside_the_floor_and_within_it_is_indistinguishable(
    results_dir: Path, tmp_path: Path
) -> None:
    """The trusted contestant at its distance exactly, then at 2.5 times the floor; a farther
    one at its distance over the floor; in the sentence and the evidence table, HTML and
    Markdown."""
    folder = _sine(results_dir, tmp_path / "results", references=True)
    _ensemble(folder, kept=16, floor=1.0)
    results, rec, *_ = _summary(folder)
    top = rec.trusted
    assert top is not None and top.name == "nuts/numpyro"
    near = _distance(results, "nuts", "numpyro")
    far = _distance(results, "ensemble", "numpyro")
    assert far > near

    _ensemble(folder, kept=16, floor=near)  # nuts's distance is the floor: within it
    results, rec, html, text, markdown = _summary(folder)
    k = far / near
    rows = {tuple(r[1:3]): r for r in tables(html)[0][1:]}
    assert rows[("nuts", "numpyro")][3] == f"{fmt.number(near)} ({INDISTINGUISHABLE})"
    assert (
        rows[("ensemble", "numpyro")][3]
        == f"{fmt.number(far)} ({fmt.number(k, 2)}\u00d7 the floor)"
    )
    for shown in (text, markdown):
        assert f"Trust nuts/numpyro (W2 to ref. {fmt.number(near)}, {INDISTINGUISHABLE}; n = 1" in (
            shown
        )
    assert f"| {fmt.number(near)} ({INDISTINGUISHABLE}) |" in markdown
    assert f"| {fmt.number(far)} ({fmt.number(k, 2)}\u00d7 the floor) |" in markdown
    standings = {s.name: s for s in rec.standings}
    assert standings["nuts/numpyro"].floor_ratio == 1.0
    assert standings["ensemble/numpyro"].floor_ratio == pytest.approx(k)
    ratios = results.cells.set_index("cell_id")[FLOOR_RATIO]
    assert ratios["sine-split0-ensemble-numpyro-seed0"] == pytest.approx(k)
    assert math.isnan(ratios["sine-split1-svi-pyro-seed0"])  # split 1 has no reference

    _ensemble(folder, kept=16, floor=near / 2.5)
    _, rec, html, text, markdown = _summary(folder)
    for shown in (text, markdown):
        assert f"Trust nuts/numpyro (W2 to ref. {fmt.number(near)}, 2.5\u00d7 the floor; n = 1" in (
            shown
        )
    assert (
        "Reference posterior: a chain ensemble of 16 MCLMC chains from deep-ensemble starts (all "
        f"16 kept), floor W2 {fmt.number(near / 2.5, 2)}" in text
    )


def test_the_references_table_shows_the_chains_and_the_floor(
    results_dir: Path, tmp_path: Path
) -> None:
    folder = _sine(results_dir, tmp_path / "results", references=True)
    _ensemble(folder, kept=14, floor=0.04)
    results = with_fidelity(load_results(folder))
    table = reference_info_table(results, "sine")
    assert table is not None
    got = dict(zip(table.header, table.rows[0], strict=True))
    assert got["gate"] == Strong("passed")
    assert got["sampler"] == "MCLMC, 2000 + 500 per chain"
    assert got["chains kept"] == "14 of 16 (2 frozen)"
    assert got["floor"] == "W2 0.040 (0.020 standardised)"
    assert got["random-split floor"] == "W2 0.010 (0.0050 standardised)"
    assert (got["R̂ across"], got["R̂ per chain"], got["ESS per chain"]) == ("1.27", "1.004", "412")
    assert (got["seconds"], got["stopped"]) == ("12.5", "reached the target floor")
    text = unescape(re.sub(r"<[^>]+>", "", _summary(folder)[2]))
    assert (
        "Reference posterior: a chain ensemble of 16 MCLMC chains from deep-ensemble starts (14 "
        "kept; 2 dropped, frozen), floor W2 0.040 (0.020 standardised), sampled in 412 s "
        "(reached the target floor); across-chain R-hat 1.27 measures how multimodal the "
        "posterior is, not convergence." in text
    )


def test_distances_to_a_reference_without_a_floor_are_shown_apart_and_not_ranked(
    results_dir: Path, tmp_path: Path
) -> None:
    folder = _sine(results_dir, tmp_path / "results", references=True)
    _ensemble(folder, kept=16, floor=0.05)
    results = with_fidelity(load_results(folder))
    main = report_tables.dataset_table(results, "sine")
    assert main is not None and "W2 to ref." in main.header
    assert "the floor" in " ".join(str(c) for row in main.rows for c in row)
    ranked = report_tables.fidelity_table(results, "sine")
    assert ranked is not None and ranked.caption.endswith(RANKING_NOTE)
    assert "W2 0.050 on split 0" in ranked.caption

    _ensemble(folder, kept=3)
    results = with_fidelity(load_results(folder))
    main = report_tables.dataset_table(results, "sine")
    assert main is not None and not any("ref." in h for h in main.header), main.header
    assert "HAS NO FLOOR (3 of 16 chains kept" in main.caption
    assert "Against the reference posterior" in main.caption
    apart = report_tables.fidelity_table(results, "sine")
    assert apart is not None and "W2 to ref." in apart.header
    assert apart.caption.startswith(f"{NOT_RANKED.capitalize()}. The reference of split(s) 0")
    assert RANKING_NOTE not in apart.caption
    cells = [c for row in apart.rows for c in row]
    assert not any(isinstance(c, Strong) or TIE_MARK in str(c) for c in cells)
    assert not any("the floor" in str(c) or INDISTINGUISHABLE in str(c) for c in cells)


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
