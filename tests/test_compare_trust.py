"""What ``compare`` trusts and what it checks: workers that never run the calling script, data
copies verified on every resume, finished cells never overwritten, failed cells retried, and
every argument checked before anything is written or started."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppl_bnn import BNN, Comparison, compare
from ppl_bnn.bench.record import read_record, read_records, write_record
from ppl_bnn.bench.replaced import read_replaced
from ppl_bnn.bench.runner import SweepSummary
from ppl_bnn.cli import main
from ppl_bnn.compare import (
    ComparisonFailedError,
    FailedCellsWarning,
    _check_outcome,
)
from ppl_bnn.data.files import DataFileError
from ppl_bnn.defaults import MAX_ATTEMPTS
from ppl_bnn.methods.memory import InsufficientMemoryError

pytestmark = pytest.mark.runtime(60)  # seconds on 2 cores: started first (tests/conftest.py)

#: A script with no ``if __name__ == "__main__":`` guard: its top level appends a line to a
#: file, then compares.
UNGUARDED = """
import numpy as np
from ppl_bnn import BNN, compare

with open({marker!r}, "a") as handle:
    handle.write("top level ran\\n")
rng = np.random.default_rng(0)
x = rng.normal(size=(40, 2))
model = BNN(x, x[:, 0] + 0.1 * rng.normal(size=40), hidden=(3,), noise="learned")
comparison = compare(model, methods=["map"], seeds=1, reference=False, jobs=1,
                     options={{"map": {{"num_steps": 30}}}}, results_dir={out!r})
print(comparison.table["status"].tolist())
"""


def test_a_script_without_the_main_guard_runs_its_top_level_once(tmp_path: Path) -> None:
    marker, script = tmp_path / "marker.txt", tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.format(marker=str(marker), out=str(tmp_path / "results")))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.read_text().splitlines() == ["top level ran"]
    assert done.stdout.strip().splitlines()[-1] == "['ok']"


#: Short fits: the point is what the results folder keeps, not the posterior.
FAST = {"map": {"num_steps": 30}}


def _data(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    return x, x[:, 0] - 0.5 * x[:, 1] + 0.1 * rng.normal(size=n)


def _compare(x: np.ndarray, y: np.ndarray, out: Path, **changes: object) -> Comparison:
    arguments = {"methods": ["map"], "seeds": 1, "reference": False, "jobs": 1, "options": FAST}
    model = BNN(x, y, hidden=(3,), noise="learned")
    return compare(model, results_dir=out, name="mine", **{**arguments, **changes})


def _records(out: Path) -> dict[str, dict]:
    return {r["cell_id"]: r for r in read_records(out)}


def test_an_altered_data_copy_is_rewritten_from_the_data_given(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    x, y = _data()
    out = tmp_path / "out"
    first = _records(_compare(x, y, out).results_dir)
    (record,) = first.values()
    assert record["data_sha256"] and record["attempt"] == 1
    (copy,) = (out / "data").glob("*.npz")
    original = copy.read_bytes()
    with np.load(copy) as stored:
        altered = {name: stored[name] for name in stored.files}
    altered["y"] = altered["y"] * 100
    np.savez(copy, **altered)

    with caplog.at_level(logging.WARNING, logger="ppl_bnn.compare"):
        _compare(x, y, out)
    assert f"{copy} does not hold the data given" in caplog.text
    assert copy.read_bytes() == original  # written again, byte for byte
    assert _records(out) == first  # nothing refitted: the cell was fit on the data given


def test_another_file_of_the_same_name_sets_the_finished_cells_aside(tmp_path: Path) -> None:
    x, y = _data()
    out = tmp_path / "out"
    (before,) = _records(_compare(x, y, out).results_dir).values()
    (after,) = _records(_compare(x, -y, out).results_dir).values()  # other data, same name
    assert after["cell_id"] == before["cell_id"] and after["data_sha256"] != before["data_sha256"]
    (note,) = read_replaced(out)
    assert note["kind"] == "cells" and note["name"] == before["cell_id"]
    assert note["reason"].startswith("refitted on other data (data SHA-256")
    kept = out / note["folder"]
    assert read_record(kept) == before and (kept / "predictions.nc").is_file()
    # A run on the first data again sets the second's result aside in turn.
    comparison = _compare(x, y, out)
    assert [n["name"] for n in read_replaced(out)] == [before["cell_id"]] * 2
    # The Summary names what was set aside, and where it is.
    comparison.report()
    markdown = (out / "report.md").read_text()
    summary = markdown[markdown.index("Summary") :]
    assert "Set aside, not overwritten:" in summary
    assert f"2 cells: {before['cell_id']} (refitted on other data (data SHA-256" in summary
    assert note["folder"] in summary


def test_failed_cells_are_retried_and_a_run_with_no_result_raises(tmp_path: Path) -> None:
    x, y = _data()
    out = tmp_path / "out"
    with pytest.raises(ComparisonFailedError, match="no cell produced a result") as failed:
        _compare(x, y, out, timeout_s=0.01)
    assert "timeout after 1 of 3 runs" in str(failed.value) and failed.value.runs_left
    assert failed.value.comparison.table["status"].tolist() == ["timeout"]
    # --no-retry keeps the failure; by default the next run tries it again.
    with pytest.raises(ComparisonFailedError):
        _compare(x, y, out, timeout_s=0.01, retry=False)
    (record,) = _records(out).values()
    assert record["attempt"] == 1
    again = _compare(x, y, out)
    (record,) = _records(out).values()
    assert record["status"] == "ok" and record["attempt"] == 2
    assert again.table["status"].tolist() == ["ok"]


def test_the_command_line_never_exits_0_when_cells_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    x, y = _data()
    csv = tmp_path / "mine.csv"
    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": y}).to_csv(csv, index=False)
    out = tmp_path / "out"
    command = ["compare", str(csv), "--target", "y", "--methods", "map", "--seeds", "1",
               "--reference", "no", "--jobs", "1", "--option", "map.num_steps=30",
               "--out", str(out)]  # fmt: skip
    with caplog.at_level(logging.ERROR):
        assert main([*command, "--timeout", "0.01"]) == 1
    assert "1 cells failed or timed out (run the same command again to retry" in caplog.text
    assert (out / "index.html").is_file()  # the report renders with no cell ok
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert main([*command, "--timeout", "0.01", "--no-retry"]) == 1
    assert "timeout after 1 of 3 runs" in caplog.text  # kept as it was, not run again
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert main(command) == 0  # retried, and ok
    assert not caplog.text


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"hidden": (1_000_000_000,)}, InsufficientMemoryError, "not enough memory for 'map'"),
        ({"test_fraction": 0.999}, DataFileError, "every one of the 1 training row of split 0"),
        ({"classes": 40}, DataFileError, "has 40 classes in 40 rows"),
    ],
)
def test_what_no_fit_could_run_is_refused_before_anything_is_written(
    tmp_path: Path, changes: dict, error: type, match: str
) -> None:
    x, y = _data()
    hidden = changes.pop("hidden", (3,))
    if "classes" in changes:
        model = BNN(x, np.arange(40), hidden=hidden, likelihood="categorical", num_classes=40)
        changes.pop("classes")
    else:
        model = BNN(x, y, hidden=hidden, noise="learned")
    out = tmp_path / "out"
    with pytest.raises(error, match=match):
        compare(model, methods=["map"], results_dir=out, **changes)
    assert not out.exists()


def test_the_command_line_refuses_them_with_status_2_and_writes_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    x, y = _data(60)
    csv = tmp_path / "mine.csv"
    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": y}).to_csv(csv, index=False)
    out = tmp_path / "out"
    base = ["compare", str(csv), "--target", "y", "--methods", "map", "--out", str(out)]
    with caplog.at_level(logging.ERROR):
        assert main([*base, "--hidden", "1000000000"]) == 2
        assert main([*base, "--test-fraction", "0.999"]) == 2
    assert "not enough memory for 'map'" in caplog.text
    assert "every one of the 1 training row of split 0" in caplog.text
    assert not out.exists()


def test_a_folder_that_is_not_a_results_folder_is_refused_as_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    x, y = _data()
    source = tmp_path / "package"
    (source / "data").mkdir(parents=True)
    (source / "__init__.py").write_text("")
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    with pytest.raises(ValueError, match=r"is not a comparison's results folder .*__init__\.py"):
        _compare(x, y, source)
    csv = tmp_path / "mine.csv"
    pd.DataFrame({"a": x[:, 0], "y": y}).to_csv(csv, index=False)
    with caplog.at_level(logging.ERROR):
        assert main(["compare", str(csv), "--target", "y", "--out", str(source)]) == 2
    assert "is not a comparison's results folder" in caplog.text
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before
    with pytest.raises(NotADirectoryError, match="is a file, not a folder"):
        _compare(x, y, source / "__init__.py")


def test_some_failed_cells_are_named_in_a_warning(tmp_path: Path) -> None:
    cells = tmp_path / "cells"
    for cell_id, status in (("d-map-seed0", "ok"), ("d-map-seed1", "timeout")):
        error = None if status == "ok" else {"type": "Timeout", "message": "killed"}
        write_record(cells / cell_id, {"cell_id": cell_id, "status": status, "error": error,
                                       "attempt": MAX_ATTEMPTS})  # fmt: skip
    run = SweepSummary(statuses=Counter(ok=1, timeout=1), failed_cells=["d-map-seed1"])
    with pytest.warns(FailedCellsWarning, match="1 cells failed or timed out") as caught:
        comparison = Comparison.__new__(Comparison)
        comparison.results_dir = tmp_path
        _check_outcome(comparison, run)
    (warning,) = caught
    assert warning.message.cells == [
        f"d-map-seed1: timeout after {MAX_ATTEMPTS} of {MAX_ATTEMPTS} runs (Timeout: killed)"
    ]
    assert "each has had its runs: pass rerun_failed=True" in str(warning.message)
