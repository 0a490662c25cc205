"""The rendered files: present, self-contained, sections present or left out as the data say."""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path

import pytest

from ppl_bnn.report import fmt, recommendation_lines, render_report
from tests.report.builder import BUDGET_NOTE, FAILED_MESSAGE, subset
from tests.report.helpers import row, section, tables


def test_every_file_is_written(report_dir: Path, html: str) -> None:
    figures = sorted((report_dir / "figures").glob("*.png"))
    assert figures, "no figures"
    for png in figures:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (report_dir / "report.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\((figures/[^)]+\.png)\)", markdown)
    assert sorted(linked) == sorted(f"figures/{p.name}" for p in figures)
    assert html.count('src="data:image/png;base64,') == len(figures)
    assert (report_dir / "results.csv").stat().st_size > 0
    for name in (
        "sine-fits-1d",
        "sine-calibration",
        "sine-runtime-quality",
        "sine-loss",
        "sine-weights",
        "sine-pruning",
        "sine-training",
        "blobs-reliability",
        "blobs-refuse",
        "blobs-ood-entropy",
        "blobs-loss",
    ):
        assert (report_dir / "figures" / f"{name}.png").is_file(), name
    assert "Parts that could not be built" not in html


def test_summary_json_holds_the_recommendations_the_page_shows(report_dir: Path, html: str) -> None:
    summary = json.loads((report_dir / "summary.json").read_text())
    assert [d["dataset"] for d in summary["datasets"]] == ["sine", "blobs"]
    answer = unescape(re.sub(r"<[^>]+>", "", html[html.index('<div id="answer"') :]))
    for entry in summary["datasets"]:
        assert f"{entry['dataset']}: {entry['sentence']}" in answer
    sine = summary["datasets"][0]
    assert sine["basis"] == "test_ll" and "the reference has no floor" in sine["basis_why"]
    grades = {(s["method"], s["backend"]): s["grade"] for s in sine["standings"]}
    assert grades[("nuts", "numpyro")] == "trust"
    assert grades[("sgld", "numpyro")] == "avoid" and grades[("nuts", "pyro")] == "not judged"
    assert recommendation_lines(report_dir) == [
        f"{d['dataset']}: {d['sentence']}" for d in summary["datasets"]
    ]


def test_html_is_self_contained(html: str) -> None:
    assert "<script" not in html
    assert "<link" not in html
    assert "@import" not in html and "url(" not in html
    for attr, value in re.findall(r'\b(src|href)="([^"]*)"', html):
        if attr == "src":
            assert value.startswith("data:image/png;base64,"), value
        elif not value.startswith("#"):
            # Only citations point outside, as plain links; nothing is loaded from them.
            assert value.startswith("https://"), value
    citations = re.findall(r'<a href="(https://[^"]+)"', html)
    assert citations and all("noopener" in a for a in re.findall(r'<a href="https://[^>]+>', html))
    anchors = set(re.findall(r'id="([^"]+)"', html))
    for target in re.findall(r'href="#([^"]+)"', html):
        assert target in anchors, target


def test_sections_of_a_full_suite(html: str) -> None:
    sections = re.findall(r'<section id="([^"]+)">\s*<h2', html)
    assert sections[0] == "summary"
    for anchor in (
        "summary",
        "summary-sine",
        "summary-blobs",
        "overview",
        "how-to-read",
        "dataset-sine",
        "dataset-blobs",
        "mcmc",
        "loo",
        "backends",
        "reference",
        "environment",
        "budgets",
    ):
        assert f'<section id="{anchor}">' in html, anchor
    env = section(html, "environment")
    assert "0123456789abcdef" in env and "numpyro" in env and "0.22.0" in env
    assert "uninformative" in section(html, "mcmc")
    assert "label-switching" in section(html, "mcmc")


def test_failed_and_diverged_cells_are_listed(html: str) -> None:
    problems = section(html, "sine-problems")
    table = tables(problems)[0]
    failed = row(table, "nuts", "pyro")
    assert failed["status"] == "failed"
    assert failed["error"] == "RuntimeError"
    assert failed["message"] == FAILED_MESSAGE
    assert "second line" not in problems.split("<details>")[0]
    assert (
        "<details><summary>sine-split0-nuts-pyro-seed0: failed, RuntimeError</summary>" in problems
    )
    assert "RuntimeError: boom &lt;&amp;&gt;</pre></details>" in problems
    diverged = row(table, "sgld", "numpyro")
    assert diverged["status"] == "diverged"
    assert "120" in diverged["message"]
    main = tables(section(html, "dataset-sine"))[0]
    assert row(main, "nuts", "pyro †")["cells"] == "1 failed"
    assert row(main, "sgld", "numpyro")["cells"] == "1 diverged"
    assert row(main, "map", "pyro")["cells"] == "1 ok, 1 ⚠ unusable"


def test_budget_notes_say_what_was_reduced_and_why(html: str) -> None:
    sine = section(html, "dataset-sine")
    assert BUDGET_NOTE in sine
    assert "num_warmup=20 vs 50 on numpyro" in sine
    budgets = tables(section(html, "budgets"))[0]
    noted = row(budgets, "sine", "nuts", "pyro")
    assert noted["reason"] == BUDGET_NOTE
    assert noted["budget (this vs other backend)"] == "num_warmup=20 vs 50 on numpyro"


def test_markdown_carries_the_same_tables(report_dir: Path) -> None:
    markdown = (report_dir / "report.md").read_text(encoding="utf-8")
    assert "## sine (regression)" in markdown and "## blobs (classification)" in markdown
    assert FAILED_MESSAGE in markdown
    assert "| method | backend | cells | n | W2 to ref. | KS to ref. |" in markdown
    assert "<details><summary>" in markdown


def _render_subset(results_dir: Path, tmp_path: Path, keep, references: bool = False) -> str:
    root = subset(results_dir, tmp_path / "results", keep, references)
    return render_report(root).read_text(encoding="utf-8")


def test_classification_only_suite_leaves_out_regression_and_mcmc(
    results_dir: Path, tmp_path: Path
) -> None:
    html = _render_subset(results_dir, tmp_path, lambda r: r["config"]["dataset"] == "blobs")
    assert '<section id="dataset-blobs">' in html
    for absent in ("dataset-sine", "mcmc", "loo", "backends", "reference", "budgets"):
        assert f'<section id="{absent}">' not in html, absent
    figures = {p.stem for p in (tmp_path / "results" / "figures").glob("*.png")}
    assert {"blobs-reliability", "blobs-ood-entropy"} <= figures
    assert not any("fits-1d" in f or "calibration" in f or "rank" in f for f in figures)
    assert "Parts that could not be built" not in html


def test_without_references_no_fidelity_is_shown_and_that_is_said(
    results_dir: Path, tmp_path: Path
) -> None:
    html = _render_subset(results_dir, tmp_path, lambda r: r["config"]["method"] == "map")
    assert '<section id="reference">' not in html
    assert "No reference posterior: the suite computes none" in section(html, "summary-sine")
    assert "W2 to ref." not in html
    assert '<section id="mcmc">' not in html
    assert '<section id="backends">' in html


def test_references_are_labelled_with_their_gate_chains_and_floor(
    html: str, results_dir: Path
) -> None:
    # Sine's two NUTS chains are too few for a floor: no floor, and that is said everywhere.
    sine = section(html, "reference-sine")
    info = row(tables(sine)[0], "0")
    assert info["gate"] == "no floor"
    assert info["sampler"] == "NUTS, 50 + 50 per chain"
    assert info["chains kept"] == "2 of 2"
    assert info["floor"] == "" and info["random-split floor"] == ""
    assert info["stopped"] == "ran 2 of at most 2 chains"
    assert info["note"] == "no floor: 2 of 2 chains kept, fewer than the 4 a floor needs"
    reference = json.loads((results_dir / "references/sine-split0/reference.json").read_text())
    found = reference["diagnostics"]
    assert info["R̂ across"] == fmt.number(found["rhat_across"])
    assert info["R̂ per chain"] == fmt.number(found["rhat_within_median"], 4)
    assert info["ESS per chain"] == fmt.number(found["ess_within_median"])
    assert "HAS NO FLOOR (2 of 2 chains kept" in sine
    assert "not ranked: reference has no floor" in section(html, "summary-sine").lower()
    assert "HAS NO FLOOR" in section(html, "dataset-sine")
    # Blobs' split 0 has a floor (5 of 6 pseudo-chains kept, one dropped as frozen).
    blobs = section(html, "reference-blobs")
    rows = {r[0]: dict(zip(tables(blobs)[0][0], r, strict=True)) for r in tables(blobs)[0][1:]}
    assert {s: r["gate"] for s, r in rows.items()} == {"0": "passed", "1": "infeasible"}
    found = json.loads((results_dir / "references/blobs-split0/reference.json").read_text())[
        "diagnostics"
    ]
    assert rows["0"]["chains kept"] == "5 of 6 (1 frozen)"
    assert rows["0"]["floor"] == f"TV {fmt.number(found['floor_tv'], 2)}"
    assert rows["0"]["random-split floor"] == f"TV {fmt.number(found['floor_tv_random'], 2)}"
    assert rows["0"]["stopped"] == "reached the target floor"
    assert rows["1"]["sampler"] == "" and rows["1"]["note"] == "too many weights"


def test_uci_dataset_gets_published_figures(results_dir: Path, tmp_path: Path) -> None:
    src = results_dir / "cells" / "sine-split0-svi-pyro-seed0"
    root = tmp_path / "uci"
    dst = root / "cells" / "bostonHousing-split0-svi-pyro-seed0"
    shutil.copytree(src, dst)
    record = json.loads((dst / "record.json").read_text())
    record["cell_id"] = dst.name
    record["config"]["dataset"] = "bostonHousing"
    (dst / "record.json").write_text(json.dumps(record))
    html = render_report(root).read_text(encoding="utf-8")
    published = tables(section(html, "bostonhousing-published"))[0]
    dropout = row(published, "MC dropout")
    assert dropout["source"].startswith("Gal & Ghahramani 2016, Table 1")
    assert (dropout["test LL"], dropout["RMSE"]) == ("-2.46 ± 0.06", "2.97 ± 0.19")
    grid = row(published, "MC dropout, grid search")
    assert (grid["test LL"], grid["RMSE"]) == ("-2.40 ± 0.04", "2.90 ± 0.18")
    assert "80/20" in grid["source"]
    ensembles = row(published, "deep ensembles")
    assert ensembles["test LL"] == "-2.41"  # published as NLL 2.41
    assert "Table 1" in ensembles["source"]
    ours = row(published, "svi · pyro")
    assert ours["source"] == "this suite" and ours["splits"] == "1"
    assert "https://github.com/yaringal/DropoutUncertaintyExps" in html
    ll, rmse = tables(section(html, "summary-published"))
    assert ll[0] == [
        "dataset",
        "svi · pyro",
        "MC dropout",
        "MC dropout, grid search",
        "PBP",
        "deep ensembles",
    ]
    assert row(ll, "bostonHousing")["PBP"] == "-2.57"
    assert (
        row(ll, "bostonHousing")["svi · pyro"]
        == f"{fmt.number(record['metrics']['test_ll'])} (n=1)"
    )
    assert row(rmse, "bostonHousing")["deep ensembles"] == "3.28"


def test_empty_results_folder_renders(tmp_path: Path) -> None:
    (tmp_path / "cells").mkdir()
    html = render_report(tmp_path, tmp_path / "out").read_text(encoding="utf-8")
    assert "holds no cell records" in html
    assert (tmp_path / "out" / "results.csv").is_file()


def test_missing_results_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        render_report(tmp_path / "nope")


def test_unreadable_files_do_not_sink_the_report(results_dir: Path, tmp_path: Path) -> None:
    root = subset(
        results_dir,
        tmp_path / "results",
        lambda r: r["cell_id"].startswith(
            ("sine-split0-svi", "sine-split0-map", "sine-split0-nuts")
        ),
        references=True,
    )
    (root / "cells" / "sine-split0-svi-pyro-seed0" / "predictions.nc").write_bytes(b"not hdf5")
    (root / "cells" / "sine-split0-map-numpyro-seed0" / "inference_data.nc").unlink()
    html = render_report(root).read_text(encoding="utf-8")
    assert "Parts that could not be built" not in html
    # The cell still has its stored metrics; only what needs its files is missing.
    sine = tables(section(html, "dataset-sine"))[0]
    assert row(sine, "svi", "pyro")["n"] == "1"
    fidelity = tables(section(html, "reference-sine"))[1]
    assert row(fidelity, "svi", "pyro")["W2 to ref."] == ""  # its predictions are unreadable
    assert row(fidelity, "map", "numpyro")["W2 to ref."] != ""


def test_datasets_whose_names_slug_alike_keep_distinct_anchors_and_figures(
    results_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "results"
    for dataset in ("sine", "SINE"):
        dst = root / "cells" / f"{dataset}-split0-svi-pyro-seed0"
        shutil.copytree(results_dir / "cells" / "sine-split0-svi-pyro-seed0", dst)
        record = json.loads((dst / "record.json").read_text())
        record["cell_id"] = dst.name
        record["config"]["dataset"] = dataset
        (dst / "record.json").write_text(json.dumps(record))
    html = render_report(root).read_text(encoding="utf-8")
    anchors = re.findall(r'<section id="([^"]+)">', html)
    assert len(anchors) == len(set(anchors))
    assert {"dataset-sine", "dataset-sine-2"} <= set(anchors)
    names = re.findall(r'<figure id="fig-([^"]+)">', html)
    assert len(names) == len(set(names)) and "sine-fits-1d-2" in names
    assert len(list((root / "figures").glob("*.png"))) == len(names)
