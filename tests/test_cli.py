"""The ``ppl-bnn`` command: argument handling, errors, and data fetch wiring."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections import Counter
from html import unescape
from pathlib import Path

import pytest

from ppl_bnn import commands
from ppl_bnn.bench.lock import LOCK_FILE, hold_lock
from ppl_bnn.bench.reference_jobs import ReferenceOutcome
from ppl_bnn.bench.runner import SweepSummary, run_suite
from ppl_bnn.bench.suite import parse_suite
from ppl_bnn.cli import build_parser, main
from tests.data.conftest import DEFAULT_SHARED_DATA
from tests.report.helpers import section


def test_report_without_results(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert main(["report", "--reports-dir", str(tmp_path)]) == 2
    assert "no stored results" in caplog.text and "ppl-bnn bench --suite default" in caplog.text
    # JAX's INFO lines (its search for a TPU) are not shown without --verbose.
    assert logging.getLogger("jax").level == logging.WARNING


def test_unknown_suite(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        assert main(["bench", "--suite", "nope"]) == 2
    assert "unknown suite 'nope'" in caplog.text


def test_bad_arguments() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["data", "fetch", "cifar", "--url", "http://x"])
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--jobs", "two"])


def test_fetch_from_an_unreachable_url(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    args = ["data", "fetch", "uci", "--url", "http://127.0.0.1:9/uci", "--data-dir", str(tmp_path)]
    with caplog.at_level(logging.ERROR):
        assert main(args) == 2
    assert "127.0.0.1:9" in caplog.text


def test_fetch_verifies_and_is_idempotent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = Path(os.environ.get("PPL_BNN_DATA") or DEFAULT_SHARED_DATA) / "uci"
    if not source.is_dir():
        pytest.skip(f"{source} is absent: no local copy of the UCI data to fetch from")
    args = ["data", "fetch", "uci", "--url", source.as_uri(), "--data-dir", str(tmp_path)]
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
        assert main(args) == 0
    assert "uci: 0 files downloaded" in caplog.text
    assert (tmp_path / "uci" / "bostonHousing" / "data" / "data.txt").is_file()


TINY_REFERENCE_SUITE = """
name = "tiny-ref"
backends = ["numpyro"]
[reference]
engine = "nuts"
num_chains = 4
num_warmup = 30
num_samples = 30
max_tree_depth = 3
[model]
hidden = [4]
[[datasets]]
name = "sine"
[[datasets]]
name = "bostonHousing"
[[datasets]]
name = "digits"
no_reference = "too many weights"
[methods.svi]
num_steps = 50
"""


def test_reference_command_computes_then_reuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_REFERENCE_SUITE)
    cache, no_data = tmp_path / "cache", tmp_path / "no-data"
    no_data.mkdir()
    args = ["reference", "--suite", str(suite), "--data-dir", str(no_data), "--jobs", "1"]
    with caplog.at_level(logging.INFO):
        # bostonHousing's data is missing: that reference fails, the others do not wait for it.
        assert main([*args, "--reference-dir", str(cache)]) == 1
    assert "reference sine-split0: computed, ok; 4 of 4 chains kept, floor w2" in caplog.text
    # Its batches, logged in its worker, are shown here as they finish.
    assert "sine split 0: reference: 4 of at most 4 chains run (4 kept) in" in caplog.text
    assert "; passed" in caplog.text
    assert (
        "reference bostonHousing-split0: unavailable, failed: DatasetNotFoundError" in caplog.text
    )
    assert "reference digits-split0: skipped, infeasible: too many weights" in caplog.text
    assert "references that failed or timed out: bostonHousing-split0" in caplog.text
    assert len(list(cache.iterdir())) == 1

    caplog.clear()
    monkeypatch.setenv("PPL_BNN_REFERENCE_DIR", str(cache))  # the cache found by its variable
    with caplog.at_level(logging.INFO):
        assert main([*args, "--datasets", "sine,digits"]) == 0
    assert "reference sine-split0: cached, ok" in caplog.text and "computed" not in caplog.text
    assert "bostonHousing" not in caplog.text


def test_bench_passes_reference_flags_and_a_failed_reference_is_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[dict] = []
    failed = ReferenceOutcome("sine-split0", "computed", {
        "status": "timeout", "note": "Timeout: killed", "passed": None,
    })  # fmt: skip

    def fake_run_suite(suite, results, **kwargs):
        calls.append(kwargs)
        return SweepSummary(references=[failed] if kwargs["references"] else [])

    monkeypatch.setattr(commands, "run_suite", fake_run_suite)
    base = ["bench", "--reports-dir", str(tmp_path), "--no-report"]
    with caplog.at_level(logging.INFO):
        # The cells' results stand, but the sweep did not do all it was asked to.
        assert main([*base, "--reference-dir", str(tmp_path / "refs")]) == 1
        assert main([*base, "--no-reference"]) == 0
    assert calls[0]["references"] and calls[0]["reference_dir"] == str(tmp_path / "refs")
    assert not calls[1]["references"] and calls[1]["reference_dir"] is None
    assert not calls[0]["wait"]
    assert main([*base, "--wait"]) == 1 and calls[2]["wait"]
    assert "reference sine-split0: computed, timeout" in caplog.text
    assert "ERROR" in caplog.text
    assert "references that failed or timed out: sine-split0" in caplog.text


def test_reference_command_needs_a_reference_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tmp_path / "plain.toml"
    suite.write_text(TINY_REFERENCE_SUITE.split("[reference]")[0] + '[[datasets]]\nname = "sine"\n'
                     "[methods.svi]\nnum_steps = 50\n")  # fmt: skip
    with caplog.at_level(logging.ERROR):
        assert main(["reference", "--suite", str(suite)]) == 2
    assert "has no [reference] table" in caplog.text


TINY_SUITE = """
name = "NAME"
backends = ["numpyro"]
[model]
hidden = [4]
[[datasets]]
name = "sine"
[methods.svi]
num_steps = 50
num_draws = 20
"""


def test_bench_refuses_a_results_folder_another_sweep_holds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE.replace("NAME", "tiny"))
    reports = tmp_path / "reports"
    with hold_lock(reports / "tiny" / LOCK_FILE), caplog.at_level(logging.ERROR):
        assert main(["bench", "--suite", str(suite), "--reports-dir", str(reports)]) == 2
    assert f"is held by pid {os.getpid()} on " in caplog.text and "--wait" in caplog.text
    assert not (reports / "tiny" / "cells").exists()


@pytest.mark.parametrize("name", ["../escaped", "", ".hidden"])
def test_a_suite_name_that_is_not_a_plain_file_name_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    suite = tmp_path / "hostile.toml"
    suite.write_text(TINY_SUITE.replace("NAME", name))
    reports = tmp_path / "reports"
    with caplog.at_level(logging.ERROR):
        assert main(["bench", "--suite", str(suite), "--reports-dir", str(reports),
                     "--no-report"]) == 2  # fmt: skip
    assert "name must be a plain file name" in caplog.text and repr(name) in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.toml"]


def test_report_refuses_a_suite_path_whose_name_leaves_the_reports_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "cells").mkdir()  # what reports/.. would hold
    (tmp_path / "r").mkdir()
    with caplog.at_level(logging.ERROR):
        assert main(["report", "--suite", "...toml", "--reports-dir", str(tmp_path / "r")]) == 2
    assert "name must be a plain file name" in caplog.text
    assert not (tmp_path / "index.html").exists()


def test_a_rerun_with_nothing_to_do_keeps_the_report_and_a_new_method_runs_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE.replace("NAME", "tiny"))
    reports = tmp_path / "reports"
    args = ["bench", "--suite", str(suite), "--reports-dir", str(reports)]
    assert main(args) == 0
    index = reports / "tiny" / "index.html"
    rendered = index.stat().st_mtime_ns
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
    assert "tiny: 1 cells, 0 to run, 1 already done" in caplog.text
    assert "tiny: no cell ran; 1 skipped as already done; " in caplog.text
    assert "nothing ran: the report" in caplog.text and index.stat().st_mtime_ns == rendered
    # The answer is printed at the end of every run, from the report's summary.json.
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and printed[0] == printed[1]
    assert printed[0].startswith("sine: Trust svi/numpyro (test LL ")
    suite.write_text(TINY_SUITE.replace("NAME", "tiny") + "[methods.map]\nnum_steps = 20\n")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
    assert "tiny: 2 cells, 1 to run, 1 already done" in caplog.text
    assert "tiny: 1 ok; 1 skipped as already done; " in caplog.text  # not "2 ok"
    assert "nothing ran" not in caplog.text and index.stat().st_mtime_ns > rendered
    assert "map" in index.read_text(encoding="utf-8")
    # Two runs produced cells (the one that ran nothing is not listed), and the overview says so.
    runs = json.loads((reports / "tiny" / "suite.json").read_text())["runs"]
    assert [(r["cells_run"], r["interrupted"]) for r in runs] == [(1, False), (1, False)]
    overview = unescape(re.sub(r"<[^>]+>", "", section(index.read_text(), "overview")))
    minutes = [f"{r['wall_s'] / 60:.1f} minutes (1 cell)" for r in runs]
    assert f"they come from 2 runs: {minutes[0]}, {minutes[1]}." in overview
    # `ppl-bnn report --suite FILE` checks the stored cells against FILE as it is now: the svi
    # cell, stored with 50 steps, is of another configuration once the file says 60.
    edited = TINY_SUITE.replace("NAME", "tiny").replace("num_steps = 50", "num_steps = 60")
    suite.write_text(edited + "[methods.map]\nnum_steps = 20\n")
    assert main(["report", "--suite", str(suite), "--reports-dir", str(reports)]) == 0
    assert capsys.readouterr().out.startswith("sine: ")
    page = unescape(index.read_text(encoding="utf-8"))
    stale = f"1 cell stored with another configuration than the suite's ({suite}, as it is now)"
    assert stale in page


@pytest.mark.parametrize(
    ("flag", "value", "valid"),
    [("--methods", "mapp", "map, svi"), ("--backends", "PYRO", "numpyro"),
     ("--datasets", "nosuch", "gap, sine")],
)  # fmt: skip
def test_bench_refuses_a_filter_that_names_nothing_of_the_suite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, flag: str, value: str, valid: str
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE.replace("NAME", "tiny").replace(
        '[methods.svi]', '[[datasets]]\nname = "gap"\n[methods.map]\n[methods.svi]'))  # fmt: skip
    reports = tmp_path / "reports"
    args = ["bench", "--suite", str(suite), "--reports-dir", str(reports), "--no-report"]
    with caplog.at_level(logging.ERROR):
        assert main([*args, flag, value]) == 2
    assert f"{flag}: unknown " in caplog.text
    assert f"{value!r}; suite 'tiny' has {valid}" in caplog.text
    assert not reports.exists()


def test_bench_says_when_known_filter_values_select_no_cell(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY_SUITE.replace("NAME", "tiny").replace(
        '[methods.svi]', '[[datasets]]\nname = "gap"\nexclude = ["map"]\n[methods.map]\n'
        '[methods.svi]'))  # fmt: skip
    args = ["bench", "--suite", str(suite), "--reports-dir", str(tmp_path), "--no-report"]
    with caplog.at_level(logging.INFO):
        assert main([*args, "--datasets", "gap", "--methods", "map"]) == 0
    said = "tiny: the suite has each value of --datasets gap --methods map, but no cell combines"
    assert said in caplog.text


@pytest.mark.parametrize("command", ["bench", "reference"])
@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_jobs_that_are_not_a_positive_integer_are_refused(
    capsys: pytest.CaptureFixture[str], command: str, jobs: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--jobs", jobs])
    assert exited.value.code == 2
    said = (
        f"argument --jobs: must be a positive integer (leave it out for one per core), got '{jobs}'"
    )
    assert said in capsys.readouterr().err


def test_run_suite_refuses_zero_jobs_before_making_a_folder(tmp_path: Path) -> None:
    suite = parse_suite({"name": "tiny", "datasets": [{"name": "sine"}], "methods": {"svi": {}}})
    with pytest.raises(ValueError, match=r"jobs must be a positive integer .*one per core.*got 0"):
        run_suite(suite, tmp_path / "tiny", jobs=0)
    assert not (tmp_path / "tiny").exists()


def test_the_sweep_summary_counts_skipped_cells_apart_from_those_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    summary = SweepSummary(
        statuses=Counter(ok=5, failed=1),
        skipped_statuses=Counter(ok=1, failed=1),
        failed_cells=["kept-failed"],
    )
    monkeypatch.setattr(commands, "run_suite", lambda suite, results, **kwargs: summary)
    with caplog.at_level(logging.INFO):
        assert main(["bench", "--reports-dir", str(tmp_path), "--no-report"]) == 1
    assert "default: 4 ok; 2 skipped as already done (1 failed, 1 ok); " in caplog.text


def test_the_help_needs_no_numerical_stack() -> None:
    """``ppl-bnn --help`` and argument errors come before JAX, torch or pandas is imported: the
    parser and the package's top level import them lazily."""
    script = (
        "import sys\n"
        "from ppl_bnn.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('jax', 'torch', 'pandas', 'numpyro', 'pyro')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_of_the_package_resolves() -> None:
    """Each name of ``__all__``, loaded on first use; ``fit`` and ``compare`` stay the functions
    once their modules (of the same names) are imported."""
    import ppl_bnn
    import ppl_bnn.compare
    import ppl_bnn.fit

    assert callable(ppl_bnn.fit) and callable(ppl_bnn.compare)

    assert all(getattr(ppl_bnn, name) is not None for name in ppl_bnn.__all__)
    assert set(ppl_bnn.__all__) <= set(dir(ppl_bnn))
    with pytest.raises(AttributeError, match="module 'ppl_bnn' has no attribute 'nope'"):
        ppl_bnn.nope  # noqa: B018
