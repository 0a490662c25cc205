"""``benchmarks/gpu_check.py``: the suite file its digits reference runs from is one the suite
parser reads, with the check's settings, at both sizes (its ``--quick`` run is the CPU check of
the script; the GPU run needs a lent device)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ppl_bnn.bench.suite import load_suite

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gpu_check  # its dataclasses look their module up there
_spec.loader.exec_module(gpu_check)


@pytest.mark.parametrize("sizes", [gpu_check.FULL, gpu_check.QUICK], ids=["full", "quick"])
def test_the_reference_suite_parses_with_the_checks_settings(tmp_path: Path, sizes) -> None:
    path = tmp_path / "gpu-check.toml"
    path.write_text(gpu_check.reference_suite(sizes))
    suite = load_suite(path)
    assert [d.name for d in suite.datasets] == ["digits"]
    settings = suite.reference.as_dict()
    assert {k: settings[k] for k in sizes.reference} == sizes.reference


def _reference(kept: int, run: int) -> dict:
    return {
        "passed": True,
        "diagnostics": {"chains_kept": kept, "chains_run": run, "floor_tv": 0.05},
    }


def test_a_chain_dropped_before_the_gate_counts_as_started_with_its_reason() -> None:
    frozen = {"chain": 1, "reason": "the tuned preconditioner has a variance that is zero"}
    info = {"batches": [{"dropped_chains": [frozen]}, {"dropped_chains": []}]}
    assert gpu_check.reference_result(_reference(7, 7), info) == (
        "passed: 7 of 8 chains kept (1 dropped before the gate: the tuned preconditioner has a "
        "variance that is zero), floor TV 0.0500"
    )
    assert gpu_check.reference_result(_reference(6, 8), {"dropped_chains": []}) == (
        "passed: 6 of 8 chains kept, floor TV 0.0500"
    )
