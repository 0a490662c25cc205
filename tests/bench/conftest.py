"""Tiny suites for runner tests: each cell is a short SVI fit on the offline sine set."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ppl_bnn.backends.numpyro.compile_cache import ENV_VAR as JAX_CACHE_ENV_VAR
from ppl_bnn.bench.suite import Suite, parse_suite

FAST_SVI = {"num_steps": 50, "num_draws": 20}


def tiny_suite(**changes: Any) -> Suite:
    """A suite of quick cells (override any top-level key)."""
    raw: dict[str, Any] = {
        "name": "tiny",
        "backends": ["numpyro"],
        "timeout_s": 240,
        "model": {"hidden": [4]},
        "datasets": [{"name": "sine"}],
        "methods": {"svi": dict(FAST_SVI)},
    }
    raw.update(changes)
    return parse_suite(raw)


@pytest.fixture(scope="session")
def jax_cache() -> str:
    """This test process's JAX compilation cache (``tests/conftest.py``), for the cells of a
    test's sweep: a tiny cell's programs then compile once per test process, not once per cell
    (a tiny NumPyro cell takes about 19 s with an empty cache and 8 s with a filled one).

    Only for sweeps whose cells are never killed while fitting: JAX writes an entry in place, so
    a cell killed while writing leaves a truncated entry, whose reading later in this process
    warns, an error under the test settings.
    """
    return os.environ[JAX_CACHE_ENV_VAR]


@pytest.fixture
def empty_data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "no-data"
    path.mkdir()
    return path


def write_netcdf(path: Path, *, truncate: bool = False) -> Path:
    """A small netCDF-4 (HDF5) file at ``path``; with ``truncate``, cut to half its length, as a
    write that ran out of disk or was copied in part leaves it."""
    import h5py
    import numpy as np

    with h5py.File(path, "w") as handle:
        handle["f"] = np.arange(64.0).reshape(8, 8)
    if truncate:
        size = path.stat().st_size
        with path.open("r+b") as file:
            file.truncate(size // 2)
    return path
