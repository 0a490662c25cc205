"""Tiny suites for runner tests: each cell is a short SVI fit on the offline sine set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture
def empty_data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "no-data"
    path.mkdir()
    return path
