"""Device selection (``configure_runtime(device=...)``, ``--device``) on a machine without a GPU:
``"auto"`` resolves to the CPU, ``"cuda"`` is refused naming what each library lacks, and a CPU
process is left exactly as it was. No test here needs a GPU."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ppl_bnn import BNN, configure_runtime, devices, fit
from ppl_bnn.backends.pyro.device import generator, to_numpy
from ppl_bnn.cli import main
from ppl_bnn.engine.registry import backend_names

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="these tests check the behaviour of a machine without a GPU"
)

SUITE = """
name = "device"
backends = ["numpyro", "pyro"]
[model]
hidden = [4]
[[datasets]]
name = "sine"
[methods.map]
num_steps = 50
"""


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``configure_runtime`` writes into the environment is undone after each test."""
    monkeypatch.delenv(devices.ENV_VAR, raising=False)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)


def test_auto_resolves_to_the_cpu_and_is_passed_on_to_child_processes() -> None:
    configure_runtime(device="auto")
    assert devices.current() == "cpu"
    assert torch.get_default_device().type == "cpu"
    assert os.environ[devices.ENV_VAR] == "cpu"  # what benchmark and compare workers apply


def test_cuda_is_refused_naming_what_torch_and_jax_lack() -> None:
    with pytest.raises(devices.DeviceError, match=r"device='cuda' needs a CUDA device") as err:
        configure_runtime(device="cuda")
    assert re.search(r"torch \S+ \(a CPU build\) sees no CUDA device", str(err.value))
    assert re.search(r"jax \S+ has no GPU backend", str(err.value))
    assert devices.current() == "cpu" and torch.get_default_device().type == "cpu"
    assert devices.ENV_VAR not in os.environ


@pytest.mark.parametrize("device", ["tpu", "CUDA", 0])
def test_an_unknown_device_is_refused(device: object) -> None:
    with pytest.raises(ValueError, match=r"unknown device .*; one of: cpu, cuda, auto"):
        configure_runtime(device=device)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", backend_names())
def test_a_fit_records_its_device(backend: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 2))
    model = BNN(x, x @ [1.0, -1.0], hidden=(), noise=0.5)
    result = fit(model, "map", backend=backend, seed=0, num_steps=20)
    assert result.info["device"] == "cpu"


def test_the_pyro_helpers_leave_cpu_results_as_they_were() -> None:
    tensor = torch.linspace(0, 1, 5, requires_grad=True) * 2
    assert np.array_equal(to_numpy(tensor), np.linspace(0, 2, 5, dtype=np.float32))
    ours = torch.randn(4, generator=generator(7))
    plain = torch.randn(4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(ours, plain)


def test_the_cli_refuses_cuda_before_anything_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    suite = tmp_path / "device.toml"
    suite.write_text(SUITE)
    data = tmp_path / "data.csv"
    data.write_text("a,b,y\n" + "\n".join(f"{i},{i % 3},{i * 0.5}" for i in range(30)) + "\n")
    reports = tmp_path / "reports"
    with caplog.at_level(logging.ERROR):
        bench = ["bench", "--suite", str(suite), "--reports-dir", str(reports)]
        assert main([*bench, "--device", "cuda"]) == 2
        out = tmp_path / "compare"
        assert (
            main(["compare", str(data), "--target", "y", "--out", str(out), "--device", "cuda"])
            == 2
        )
    assert caplog.text.count("needs a CUDA device") == 2
    assert not reports.exists() and not out.exists()


def test_the_cli_refusal_is_all_it_prints_in_a_fresh_process(tmp_path: Path) -> None:
    """In a process whose JAX has not yet looked for its platforms (as a user's shell starts
    one), the refusal is the only line: not JAX's log of the platforms it failed to load."""
    data = tmp_path / "data.csv"
    data.write_text("a,y\n" + "\n".join(f"{i},{i * 0.5}" for i in range(30)) + "\n")
    command = [sys.executable, "-m", "ppl_bnn.cli", "compare", str(data), "--target", "y",
               "--out", str(tmp_path / "out"), "--device", "cuda"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "ERROR ppl_bnn.cli: device='cuda' needs a CUDA device" in lines[0]


def test_a_sweep_on_auto_runs_on_the_cpu(tmp_path: Path) -> None:
    suite = tmp_path / "device.toml"
    suite.write_text(SUITE)
    reports = tmp_path / "reports"
    args = ["bench", "--suite", str(suite), "--reports-dir", str(reports), "--device", "auto"]
    assert main([*args, "--jobs", "1", "--no-report"]) == 0
    cells = sorted((reports / "device" / "cells").iterdir())
    assert [c.name for c in cells] == [
        "sine-split0-map-numpyro-seed0",
        "sine-split0-map-pyro-seed0",
    ]
    for cell in cells:
        assert json.loads((cell / "fit.json").read_text())["info"]["device"] == "cpu"
