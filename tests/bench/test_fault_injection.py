"""Fault injection on the sweep: ``kill -9`` at random moments, concurrent sweeps, corrupt and
truncated files, hostile names.

Every sweep here is the real ``ppl-bnn bench`` in a subprocess on tiny cells (a 50-step SVI fit
of the sine set), sharing one reports folder and so one JAX compilation cache. The moments of
the kills are drawn from a fixed seed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from ppl_bnn.bench.lock import LOCK_FILE, hold_lock
from ppl_bnn.bench.record import cell_dirs, read_attempts
from ppl_bnn.bench.runner import run_suite
from ppl_bnn.bench.suite import SuiteError, load_suite, parse_suite
from ppl_bnn.cli import main
from ppl_bnn.report import render_report
from ppl_bnn.report.load import load_results

pytestmark = pytest.mark.runtime(120)  # seconds on 2 cores: started first (tests/conftest.py)

#: A suite name that is a valid file name, shown in HTML and Markdown: it must be escaped.
HOSTILE = "<script>alert('x') Ünïcode & spaces *bold* [link](#)"
SUITE = """
name = {name}
seeds = [0, 1]
backends = ["numpyro"]
[model]
hidden = [4]
[[datasets]]
name = "sine"
[methods.svi]
num_steps = 50
num_draws = 20
"""
SEED = 16  # the kill moments
TIMEOUT = 300


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One reports folder (and so one JAX cache) for every sweep of the module."""
    return tmp_path_factory.mktemp("reports")


def _suite_file(reports: Path, name: str) -> Path:
    path = reports.parent / f"{hashlib.sha256(name.encode()).hexdigest()[:12]}.toml"
    path.write_text(SUITE.format(name=json.dumps(name)))
    return path


def _command(reports: Path, name: str, *flags: str) -> list[str]:
    suite = _suite_file(reports, name)
    return [sys.executable, "-m", "ppl_bnn.cli", "bench", "--suite", str(suite),
            "--reports-dir", str(reports), "--jobs", "1", *flags]  # fmt: skip


def _start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _assert_complete(results: Path) -> dict[str, dict]:
    """Every stored cell is whole: a readable ok record whose files are all readable."""
    loaded = load_results(results)
    assert loaded.problems == [], loaded.problems
    assert len(loaded.records) == len(cell_dirs(results))
    for record in loaded.records:
        assert record["status"] == "ok", record["cell_id"]
        assert set(record["files"]) == {"inference_data", "predictions"}
    return {r["cell_id"]: r for r in loaded.records}


@pytest.fixture(scope="module")
def finished(reports: Path) -> Path:
    """A suite run to the end under a hostile (but valid) name, report included."""
    done = subprocess.run(_command(reports, HOSTILE), capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = reports / HOSTILE
    assert len(_assert_complete(results)) == 2
    return results


def _copy(finished: Path, name: str) -> Path:
    """The finished results under another suite name (as if that suite had run)."""
    results = finished.parent / name
    shutil.copytree(finished, results, ignore=shutil.ignore_patterns("figures", "*.html", "*.md"))
    suite = json.loads((results / "suite.json").read_text())
    (results / "suite.json").write_text(json.dumps({**suite, "name": name}))
    return results


def test_kill_minus_9_at_random_moments_loses_nothing_and_the_sweep_resumes(
    finished: Path, reports: Path
) -> None:
    # ``finished`` first: its sweep fills the JAX cache, so that killed cells die fitting, not
    # compiling.
    rng = random.Random(SEED)
    command = _command(reports, "killed", "--no-report")
    results = reports / "killed"
    for _ in range(3):
        proc = _start(command)
        time.sleep(rng.uniform(0.5, 8.0))
        _kill(proc)
        if (results / "suite.json").is_file():  # else killed before any cell could be stored
            _assert_complete(results)
        else:
            assert not results.is_dir() or cell_dirs(results) == []
    time.sleep(1.5)  # orphaned workers notice their parent is gone within a second
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr
    assert len(_assert_complete(results)) == 2
    assert [p.name for p in (results / "cells").iterdir() if p.name.startswith(".")] == []
    assert not (results / LOCK_FILE).exists()


def test_kill_minus_9_during_a_forced_rerun_keeps_the_earlier_result(
    finished: Path, reports: Path
) -> None:
    results = _copy(finished, "forced")
    before = _assert_complete(results)
    rng = random.Random(SEED + 1)
    for _ in range(2):
        proc = _start(_command(reports, "forced", "--no-report", "--force"))
        time.sleep(rng.uniform(1.0, 12.0))
        _kill(proc)
        after = _assert_complete(results)
        assert set(after) == set(before)
        for cell_id, record in after.items():  # the earlier result, or a rerun that finished
            assert record == before[cell_id] or record["finished_at"] >= before[cell_id][
                "finished_at"]  # fmt: skip
            assert read_attempts(results / "cells" / cell_id) == []


def test_a_second_sweep_is_refused_or_waits_for_the_first(
    finished: Path, reports: Path, tmp_path: Path
) -> None:
    # The lock is held here, in place of a first sweep, for as long as the test needs: a real
    # first sweep of two tiny cells can end before a second process has even imported torch.
    results = _copy(finished, "concurrent")
    log = tmp_path / "waited.log"
    with hold_lock(results / LOCK_FILE):
        refused = subprocess.run(_command(reports, "concurrent", "--no-report"),
                                 capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert f"is held by pid {os.getpid()} on " in refused.stderr and "--wait" in refused.stderr
        with log.open("w") as err:
            waited = subprocess.Popen(_command(reports, "concurrent", "--no-report", "--wait"),
                                      stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
        deadline = time.monotonic() + TIMEOUT
        while "waiting for" not in log.read_text() and waited.poll() is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert waited.poll() is None, log.read_text()  # it waits while the lock is held
    assert waited.wait(timeout=TIMEOUT) == 0, log.read_text()
    assert "2 skipped as already done" in log.read_text()
    assert len(_assert_complete(results)) == 2


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 3)])


def _corrupt(path: Path) -> None:
    path.write_bytes(b"\x00garbage\xff" * 40)


@pytest.mark.parametrize("damage", [_truncate, _corrupt], ids=["truncated", "corrupt"])
@pytest.mark.parametrize(
    ("file", "said"),
    [
        ("record.json", "cells/{cell}/record.json unreadable"),
        ("predictions.nc", "cells/{cell}/predictions.nc is unreadable"),
        ("inference_data.nc", "cells/{cell}/inference_data.nc is unreadable"),
        ("suite.json", "suite.json is unreadable"),
    ],
)
def test_every_damaged_file_is_a_problem_of_the_report(
    finished: Path, tmp_path: Path, file: str, said: str, damage: Callable[[Path], None]
) -> None:
    results = tmp_path / "results"
    shutil.copytree(finished, results)
    cell = sorted(p.name for p in cell_dirs(results))[0]
    damage(results / file if file == "suite.json" else results / "cells" / cell / file)
    problems = load_results(results).problems
    assert len(problems) == 1 and problems[0].startswith(said.format(cell=cell)), problems


def test_the_problems_box_shows_what_is_damaged_with_names_escaped(
    finished: Path, tmp_path: Path
) -> None:
    html = (finished / "index.html").read_text(encoding="utf-8")
    markdown = (finished / "report.md").read_text(encoding="utf-8")
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)" in html
    assert "Ünïcode &amp; spaces" in html and 'class="problems"' not in html
    assert markdown.splitlines()[0] == (
        "# Benchmark report: \\<script\\>alert('x') Ünïcode \\& spaces \\*bold\\* \\[link\\](\\#)"
    )

    results = tmp_path / HOSTILE
    shutil.copytree(finished, results)
    first, second = sorted(cell_dirs(results))
    _truncate(first / "record.json")
    _corrupt(second / "predictions.nc")
    (second / "inference_data.nc").unlink()
    html = render_report(results).read_text(encoding="utf-8")
    box = html[html.index('<aside class="problems"') : html.index("</aside>")]
    assert "Problems</strong> (3)" in box
    for shown in (f"cells/{first.name}/record.json unreadable",
                  f"cells/{second.name}/predictions.nc is unreadable",
                  f"cells/{second.name}/inference_data.nc is missing"):  # fmt: skip
        assert shown in box
        assert shown.replace("_", "\\_") in (results / "report.md").read_text(encoding="utf-8")
    assert "1 cell" in html  # the overview counts the one readable cell
    # The report writes only inside the results folder.
    assert sorted(p.name for p in tmp_path.iterdir()) == [HOSTILE]


def test_a_partial_rerun_after_an_edit_flags_the_cells_of_the_earlier_suite(
    finished: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    shutil.copytree(finished, results)
    raw = tomllib.loads(SUITE.format(name=json.dumps("edited")))
    raw["methods"] = {"svi": {**raw["methods"]["svi"], "num_steps": 60}, "map": {"num_steps": 20}}
    # Only the new method's cells run; the edited svi cells stay as the first suite left them.
    run_suite(parse_suite(raw), results, only={"method": {"map"}})
    (problem,) = load_results(results).problems
    assert problem.startswith("2 cells stored with another configuration than the suite's")
    assert "sine-split0-svi-numpyro-seed0, sine-split0-svi-numpyro-seed1" in problem


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({"name": "../../escaped"}, "name must be a plain file name"),
        ({"name": "/tmp/escaped"}, "name must be a plain file name"),
        ({"name": "."}, "name must be a plain file name"),
        ({"datasets": [{"name": "<script>"}]}, "unknown dataset '<script>'"),
        ({"datasets": [{"name": "../sine"}]}, "unknown dataset '../sine'"),
        ({"methods": {"<svi>": {}}}, "unknown method '<svi>'"),
        ({"methods": {"svi": {"pyro": {"../x": 1}}}}, r"svi on pyro: .*'\.\./x'"),
        ({"datasets": [{"name": "sine", "exclude": ["svi.<b>"]}]}, "'svi.<b>' names no backend"),
    ],
)
def test_hostile_names_are_refused_by_name_before_anything_is_written(
    tmp_path: Path, table: dict, error: str
) -> None:
    raw = {"name": "ok", "backends": ["numpyro"], "datasets": [{"name": "sine"}],
           "methods": {"svi": {"num_steps": 5}}, **table}  # fmt: skip
    suite = tmp_path / "hostile.toml"
    suite.write_text("\n".join(_toml(raw)))
    with pytest.raises(SuiteError, match=error):
        load_suite(suite)
    assert main(["bench", "--suite", str(suite), "--reports-dir", str(tmp_path / "r")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.toml"]


def _toml(raw: dict) -> list[str]:
    """``raw`` (one level of tables, lists of tables for datasets) as TOML lines."""
    lines = [f"{k} = {json.dumps(v)}" for k, v in raw.items() if k not in ("datasets", "methods")]
    for dataset in raw["datasets"]:
        lines += ["[[datasets]]", *(f"{k} = {json.dumps(v)}" for k, v in dataset.items())]
    for method, options in raw["methods"].items():
        lines.append(f"[methods.{json.dumps(method)}]")
        for key, value in options.items():
            if isinstance(value, dict):
                lines.append(f"[methods.{json.dumps(method)}.{key}]")
                lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()]
            else:
                lines.append(f"{key} = {json.dumps(value)}")
    return lines
