"""One benchmark cell's stored outcome: a versioned JSON record beside its netCDF files.

A cell's directory ``<results>/cells/<cell_id>/`` holds

- ``record.json``: ``schema_version``, ``cell_id``, ``suite``, ``config`` (everything that
  determines the result: dataset, split, data limits, model, method, backend, seed, options),
  ``config_hash``, ``status`` (``ok`` / ``failed`` / ``timeout`` / ``diverged``), ``error``
  (type, message, traceback) or null, ``metrics`` (flat ``{name: float}``), ``curves`` (named lists
  of floats for figures), ``timings`` (seconds), ``info`` (the fit's execution details),
  ``budget_note`` (why a budget was reduced) or null, ``versions``, ``machine``, ``started_at``,
  ``finished_at`` (ISO 8601) and ``files`` (the netCDF files written);
- ``inference_data.nc``: the fit as ArviZ InferenceData;
- ``predictions.nc``: predictive summaries at the test inputs (and on a grid for 1-D sets) in
  original units, out-of-distribution entropies and the loss trace.

Every file is written atomically (temporary file, fsync, rename), the record last, so a record
that exists describes files that are complete.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppl_bnn.files import write_atomic

SCHEMA_VERSION = 1
RECORD_FILE = "record.json"
IDATA_FILE = "inference_data.nc"
PREDICTIONS_FILE = "predictions.nc"
STATUSES = ("ok", "failed", "timeout", "diverged")


def _jsonable(value: Any) -> Any:
    """Floats that JSON cannot hold (NaN, inf) become null; numpy scalars become Python ones."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_record(cell_dir: Path, record: Mapping[str, Any]) -> Path:
    """Validate and atomically write ``record.json`` into ``cell_dir``."""
    if record.get("status") not in STATUSES:
        raise ValueError(f"record status must be one of {STATUSES}, got {record.get('status')!r}")
    text = json.dumps(_jsonable({"schema_version": SCHEMA_VERSION, **record}), indent=2)
    path = cell_dir / RECORD_FILE
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    return path


def read_record(cell_dir: Path) -> dict[str, Any] | None:
    """The record in ``cell_dir``, or None if there is none or it is from another schema."""
    path = cell_dir / RECORD_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if record.get("schema_version") != SCHEMA_VERSION:
        return None
    return record


def read_records(results_dir: Path) -> list[dict[str, Any]]:
    """Every readable record under ``results_dir/cells``, sorted by cell id (staging
    directories, whose names start with a dot, are not results yet)."""
    cells = Path(results_dir) / "cells"
    if not cells.is_dir():
        return []
    dirs = [d for d in sorted(cells.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    records = [read_record(d) for d in dirs]
    return [r for r in records if r is not None]
