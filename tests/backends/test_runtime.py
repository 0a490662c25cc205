"""How hard XLA optimises (``configure_runtime(xla_optimisation=...)``): each level's flags in
``$XLA_FLAGS`` in place of the values given there, an unknown level refused by name, and a level
asked for after JAX started refused rather than left unapplied."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest
from jax._src import xla_bridge

from ppl_bnn import configure_runtime
from ppl_bnn.backends.numpyro import runtime
from ppl_bnn.engine.xla import XLA_OPTIMISATION, XLA_OPTIMISATION_FLAGS, xla_optimisation_flags

ROOT = Path(__file__).resolve().parents[2]


def test_every_level_has_flags_and_the_flags_that_set_the_level_are_read_back(
    monkeypatch: pytest.MonkeyPatch,
):
    assert set(XLA_OPTIMISATION_FLAGS) == set(XLA_OPTIMISATION)
    monkeypatch.setenv(
        "XLA_FLAGS",
        "--xla_force_host_platform_device_count=2 --xla_cpu_use_fusion_emitters=false "
        "--xla_backend_optimization_level=1",
    )
    assert xla_optimisation_flags() == XLA_OPTIMISATION_FLAGS["low"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    assert xla_optimisation_flags() == ()


@pytest.mark.parametrize(
    ("before", "level", "after"),
    [
        ("", "low", "--xla_backend_optimization_level=1 --xla_cpu_use_fusion_emitters=false"),
        (
            "--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=0",
            "low",
            "--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=1 "
            "--xla_cpu_use_fusion_emitters=false",
        ),
        (
            "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false "
            "--xla_dump_to=d",
            "full",
            "--xla_dump_to=d",
        ),
    ],
)
def test_a_level_replaces_the_values_xla_flags_gave_its_flags(
    monkeypatch: pytest.MonkeyPatch, before: str, level: str, after: str
):
    monkeypatch.setenv("XLA_FLAGS", before)
    monkeypatch.setattr(xla_bridge, "backends_are_initialized", lambda: False)
    runtime.set_xla_optimisation(level)
    assert os.environ["XLA_FLAGS"] == after


def test_an_unknown_level_is_refused_by_name():
    with pytest.raises(ValueError, match="xla_optimisation must be one of 'full', 'low', got 'O3'"):
        configure_runtime(xla_optimisation="O3")


def test_a_level_after_jax_started_is_refused_and_the_flags_are_left_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
):
    jnp.zeros(1).block_until_ready()  # JAX has started its backend in this process
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=d")
    with pytest.raises(RuntimeError, match="must be set before JAX first runs a program"):
        configure_runtime(xla_optimisation="low")
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=d"


def _tanh_bits(configure: str, xla_flags: str) -> str:
    """The bytes of ``tanh`` at 1,001 points computed by a compiled program in a new process with
    ``$XLA_FLAGS`` at ``xla_flags`` that first runs ``configure``, as hex."""
    code = (
        f"{configure}\n"
        "import jax, jax.numpy as jnp, numpy as np\n"
        "x = jnp.linspace(-3, 3, 1001, dtype=jnp.float32)\n"
        "print(np.asarray(jax.jit(jnp.tanh)(x)).tobytes().hex())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
        env={**os.environ, "XLA_FLAGS": xla_flags}, timeout=300,
    )  # fmt: skip
    return out.stdout.split()[-1]


def test_a_new_process_compiles_with_the_level_it_set():
    """XLA's CPU emitters round ``tanh`` differently in the last bits under the two levels: the
    process that set ``"low"`` computes what the level's flags given by hand compute, not what
    XLA's defaults do."""
    low = _tanh_bits(
        "from ppl_bnn import configure_runtime; configure_runtime(xla_optimisation='low')", ""
    )
    assert low == _tanh_bits("", " ".join(XLA_OPTIMISATION_FLAGS["low"]))
    assert low != _tanh_bits("", "")


TORCH_THREADS = """
import sys
from ppl_bnn import configure_runtime
configure_runtime(torch_threads={threads})
print("torch" in sys.modules)
{then}
import torch
print(torch.get_num_threads())
"""


@pytest.mark.parametrize("torch_first", [False, True])
def test_torch_threads_are_set_without_importing_torch_until_the_backend_does(torch_first):
    """A thread count given before torch is imported is set when Pyro's ops import it; given
    after, at once. 3: more than the 2 cores torch would take by default on CI's machines."""
    then = "from ppl_bnn.engine.registry import get_backend; get_backend('pyro')"
    code = TORCH_THREADS.format(threads=3, then=then)
    if torch_first:
        code = "import torch\n" + code
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True,
        check=True,
    ).stdout.split()  # fmt: skip
    assert out == [str(torch_first), "3"]
