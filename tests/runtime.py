"""The runtime of every test process, set before JAX or torch first run: by ``tests/conftest.py``
under pytest, and by the scripts under ``tests/`` that write what tests compare against
(``python -m tests.methods.test_conformance``), so that both see the same numbers."""

from __future__ import annotations

import os

from ppl_bnn import configure_runtime
from ppl_bnn.bench.pool import PRELOAD_VAR
from ppl_bnn.engine.registry import backend_names

#: XLA compiles the tests' programs without its optimisation passes: LLVM at its lowest level and
#: XLA's older CPU emitters. Compiling took much of the suite's time on 2 cores; so compiled, the
#: programs compile several times faster and some run slower, which the tests' tiny models hardly
#: feel (``python benchmarks/compile_flags.py`` measures both). They compute the same functions, but
#: their floating-point rounding may differ in the last bits: draws the tests store differ from
#: those of a fit with XLA's defaults, which ``ppl-bnn bench`` and users' fits keep.
TEST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def configure_test_runtime() -> None:
    """The XLA flags above (kept by the processes the tests start, which inherit them), two XLA
    host devices so NumPyro runs two chains in parallel, one torch thread per process, and
    every backend imported by the fork server of the sweeps' workers, whichever test's sweep
    starts it (:func:`ppl_bnn.bench.pool.preload_backends`)."""
    os.environ.setdefault(PRELOAD_VAR, ",".join(backend_names()))
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join([*flags, *(f for f in TEST_XLA_FLAGS if f not in flags)])
    configure_runtime(host_devices=2, torch_threads=1)
