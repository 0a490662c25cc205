"""``suite.json``: a results folder's description of its suite, the cells of its last run, the
config hash of every cell of the suite as it is now, the environment and the runs that
produced what the folder holds."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ppl_bnn.bench.cell import Cell
from ppl_bnn.bench.environment import environment
from ppl_bnn.bench.record import SUITE_FILE
from ppl_bnn.bench.staging import FILE_MODE
from ppl_bnn.bench.suite import Suite
from ppl_bnn.files import write_atomic

logger = logging.getLogger(__name__)


def current_configs(suite: Suite, data_dir: str | None) -> dict[str, str] | None:
    """The config hash of every cell of the suite as it is now (all splits, every dataset,
    method and backend, whatever this run selects; with ``seeds = "auto"`` every seed up to its
    cap), by cell id: what the report checks stored
    records against. None where the whole suite cannot be listed (a set's data is missing)."""
    try:
        cells = suite.cells(data_dir=data_dir, seeds=suite.all_seeds)
        return {c.cell_id: c.config_hash() for c in cells}
    except (OSError, ValueError) as err:
        logger.info("%s: suite.json lists only this run's cells: %s", suite.name, err)
        return None


def write_suite_file(
    suite: Suite,
    results_dir: Path,
    cells: list[Cell],
    *,
    references: bool = True,
    configs: dict[str, str] | None = None,
    **extra: Any,
) -> None:
    """``suite.json``: the suite, its reference settings (null when it has none or they were
    not run), its margins (null for a performance suite), the cells of this run, the config
    hash of every cell of the suite (``configs``, see :func:`current_configs`; left out when
    None), the environment it ran in and ``extra``."""
    reference = suite.reference.as_dict() if references and suite.reference else None
    data = {
        "name": suite.name,
        "kind": suite.kind,
        "description": suite.description,
        "reference": reference,
        "margins": suite.margins.as_dict() if suite.margins else None,
        "environment": environment(),
        "cells": [c.to_dict() for c in cells],
        **({"configs": configs} if configs is not None else {}),
        **extra,
    }
    text = json.dumps(data, indent=2)
    path = results_dir / SUITE_FILE
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    path.chmod(FILE_MODE)


def previous_runs(results: Path) -> list[dict[str, Any]]:
    """The runs ``suite.json`` lists (none where it is missing, unreadable or lists none)."""
    try:
        runs = json.loads((results / SUITE_FILE).read_text()).get("runs", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []
