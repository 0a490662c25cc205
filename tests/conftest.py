"""Test entry point: process-wide runtime settings, applied before JAX or torch first run."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import configure_runtime

# Two XLA host devices so NumPyro runs two chains in parallel; one torch thread per process.
configure_runtime(host_devices=2, torch_threads=1)


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Reuse compiled programs between tests that build identical ones (e.g. differing seeds)."""
    import jax

    jax.config.update("jax_compilation_cache_dir", str(tmp_path_factory.mktemp("jax_cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


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
