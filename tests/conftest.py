"""Test entry point: process-wide runtime settings, applied before JAX or torch first run."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from ppl_bnn import configure_runtime
from ppl_bnn.backends.numpyro.compile_cache import ENV_VAR as JAX_CACHE_ENV_VAR

# Two XLA host devices so NumPyro runs two chains in parallel; one torch thread per process.
configure_runtime(host_devices=2, torch_threads=1)


def pytest_configure(config: pytest.Config) -> None:
    """Give this test process (and the processes it starts) its own JAX compilation cache.

    It is set before test modules are collected (importing the NumPyro backend switches the
    cache on), so no test writes to the user's cache, and tests that build identical programs
    (e.g. differing seeds) load them. One directory per process, not one for all xdist workers:
    JAX writes entries in place, and a worker reading an entry while another writes it would
    get JAX's "Error reading persistent compilation cache entry" warning, an error here.
    """
    cache = tempfile.TemporaryDirectory(prefix="ppl_bnn-test-jax-cache-")
    config.add_cleanup(cache.cleanup)
    os.environ[JAX_CACHE_ENV_VAR] = cache.name


@pytest.fixture
def regression_data() -> tuple[np.ndarray, np.ndarray]:
    """A small 1-D regression set."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(24, 1))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=24)
    return x, y


@pytest.fixture
def classification_data() -> tuple[np.ndarray, np.ndarray]:
    """A small 3-class set with 2 features."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 2))
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    return x, y
