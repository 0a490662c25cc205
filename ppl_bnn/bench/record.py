"""One benchmark cell's stored outcome: a versioned JSON record beside its netCDF files.

A cell's directory ``<results>/cells/<cell_id>/`` holds

- ``record.json``: ``schema_version``, ``cell_id``, ``suite``, ``config`` (everything that
  determines the result: dataset, split, data limits, model, method, backend, seed, options),
  ``config_hash``, ``status`` (``ok`` / ``failed`` / ``timeout`` / ``diverged``), ``error``
  (type, message, traceback) or null, ``metrics`` (flat ``{name: float}``), ``curves`` (named lists
  of floats for figures, with scalars that label them, e.g. ``training``'s ``kl_weight``),
  ``timings`` (seconds), ``info`` (the fit's execution details),
  ``budget_note`` (why a budget was reduced) or null, ``versions``, ``machine``, ``started_at``,
  ``finished_at`` (ISO 8601), ``files`` (the netCDF files written), ``attempt`` (see below) and,
  once its data loaded, ``data_sha256`` (:func:`ppl_bnn.reference.data_fingerprint` of the
  training and test arrays it was fit on);
- ``inference_data.nc``: the fit as ArviZ InferenceData, and beside it ``fit.json`` (and a
  guide's ``variational.nc``, a linearised predictive's ``linearised.nc``): with these the folder
  loads as a :class:`~ppl_bnn.results.FitResult`;
- ``predictions.nc``: predictive summaries at the test inputs (and on a grid for 1-D sets) in
  original units, out-of-distribution entropies and the loss trace;
- ``attempts/<time>.json``, only where a rerun failed or timed out while the folder held a
  complete (``ok`` or ``diverged``) result: that rerun's record, the result staying in place;
- ``replaced/record-<time>.json``, only where the cell ran again over a ``record.json`` this
  version could not read (from a newer schema, or damaged): that file, kept.

A record's ``attempt`` counts the runs of its configuration that led to it: 1 for the first, one
more for each run after a ``failed`` or ``timeout`` one. A sweep runs a failed cell again until
it has had :data:`~ppl_bnn.defaults.MAX_ATTEMPTS` (:func:`retried`).

Every file is written atomically (temporary file, fsync, rename), the record last, so a record
that exists describes files that are complete.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppl_bnn.defaults import MAX_ATTEMPTS
from ppl_bnn.files import netcdf_problem, write_atomic
from ppl_bnn.reference import (  # noqa: F401 - a cell's file names are all here
    PREDICTIONS_FILE,
    RECORD_FILE,
)

SCHEMA_VERSION = 1
#: A results folder's description of its suite, its cells and the runs that produced them.
SUITE_FILE = "suite.json"
IDATA_FILE = "inference_data.nc"
ATTEMPTS_DIR = "attempts"
#: Where a record this version cannot read is kept when its cell runs again (in the cell's
#: folder), and where results of other data are set aside (in the results folder:
#: :mod:`ppl_bnn.bench.replaced`).
REPLACED_DIR = "replaced"
STATUSES = ("ok", "failed", "timeout", "diverged")
#: Statuses of a result (the method ran to its end, or broke down numerically: reproducible).
COMPLETE = ("ok", "diverged")
#: Statuses without a result.
FAILED = ("failed", "timeout")


class RecordError(ValueError):
    """A ``record.json`` that cannot be used: where it is and why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


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


def _dump(record: Mapping[str, Any]) -> str:
    if record.get("status") not in STATUSES:
        raise ValueError(f"record status must be one of {STATUSES}, got {record.get('status')!r}")
    return json.dumps(_jsonable({"schema_version": SCHEMA_VERSION, **record}), indent=2)


def write_record(cell_dir: Path, record: Mapping[str, Any]) -> Path:
    """Validate and atomically write ``record.json`` into ``cell_dir``."""
    text = _dump(record)
    path = cell_dir / RECORD_FILE
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    return path


def load_record(cell_dir: Path) -> dict[str, Any]:
    """The record in ``cell_dir``.

    Raises:
        RecordError: there is none, it is not JSON, it is from another schema, or it lacks its
            cell id or a valid status.
    """
    path = cell_dir / RECORD_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise RecordError(path, "missing") from err
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RecordError(path, f"unreadable ({type(err).__name__}: {err})") from err
    if not isinstance(record, dict):
        raise RecordError(path, "not a JSON object")
    if record.get("schema_version") != SCHEMA_VERSION:
        version = record.get("schema_version")
        raise RecordError(path, f"schema version {version!r}, not {SCHEMA_VERSION}")
    if not isinstance(record.get("cell_id"), str) or record.get("status") not in STATUSES:
        raise RecordError(path, "no cell_id or no valid status")
    return record


def holds_results(record: Mapping[str, Any]) -> bool:
    """Whether the record holds what its run measured: a cell's ``metrics``, a performance
    probe's ``perf`` rows."""
    return any(isinstance(record.get(k), dict | list) and record[k] for k in ("metrics", "perf"))


def record_problem(cell_dir: Path, record: Mapping[str, Any]) -> str | None:
    """Why a record whose status says the cell is done (:data:`COMPLETE`) is not a whole
    result, or None: an ``ok`` record without its metrics, or a file it lists that is missing,
    unreadable or truncated (``cell_dir``: the folder the files are in)."""
    if record.get("status") not in COMPLETE:
        return None
    if record.get("status") == "ok" and not holds_results(record):
        return "its record says ok but holds no metrics"
    files = record.get("files")
    for name in files.values() if isinstance(files, dict) else ():
        if reason := netcdf_problem(Path(cell_dir) / str(name)):
            return f"{name} {reason}"
    return None


def read_record(cell_dir: Path) -> dict[str, Any] | None:
    """The record in ``cell_dir``, or None if there is none, it does not parse or it is from
    another schema."""
    try:
        return load_record(cell_dir)
    except RecordError:
        return None


def cell_dirs(results_dir: Path) -> list[Path]:
    """The cell folders under ``results_dir/cells``, sorted (staging folders, whose names start
    with a dot, are not results yet)."""
    cells = Path(results_dir) / "cells"
    if not cells.is_dir():
        return []
    return [d for d in sorted(cells.iterdir()) if d.is_dir() and not d.name.startswith(".")]


def read_records(results_dir: Path) -> list[dict[str, Any]]:
    """Every readable record under ``results_dir/cells``, sorted by cell id."""
    records = [read_record(d) for d in cell_dirs(results_dir)]
    return [r for r in records if r is not None]


def write_attempt(cell_dir: Path, record: Mapping[str, Any]) -> Path:
    """Keep the record of a rerun that failed beside the result it did not replace, as
    ``attempts/<finished_at>.json``."""
    text = _dump(record)
    stamp = str(record.get("finished_at") or "").replace(":", "").replace("+0000", "Z")
    attempts = cell_dir / ATTEMPTS_DIR
    path = attempts / f"{stamp or 'unknown'}-{os.getpid()}.json"
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    return path


def read_attempts(cell_dir: Path) -> list[dict[str, Any]]:
    """The records of reruns that failed and left the result in ``cell_dir`` in place, oldest
    first (unreadable ones are skipped)."""
    out = []
    for path in sorted((cell_dir / ATTEMPTS_DIR).glob("*.json")):
        try:
            attempt = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(attempt, dict):
            out.append(attempt)
    return out


def last_run(cell_dir: Path, config_hash: str) -> dict[str, Any] | None:
    """The record of the cell's result, or of its last failed attempt where that result has
    another configuration (a rerun with ``config_hash`` that failed and left it in place)."""
    record = read_record(cell_dir)
    if record is not None and record.get("config_hash") != config_hash:
        attempts = read_attempts(cell_dir)
        return attempts[-1] if attempts else record
    return record


def attempts_made(record: Mapping[str, Any]) -> int:
    """The runs of the record's configuration that led to it (records without the count are
    from one run)."""
    attempt = record.get("attempt", 1)
    return attempt if isinstance(attempt, int) and attempt >= 1 else 1


def next_attempt(cell_dir: Path, config_hash: str) -> int:
    """The ``attempt`` of the cell's next run with ``config_hash``: one more than the last run's
    where that run had the same configuration and failed, else 1."""
    last = last_run(cell_dir, config_hash)
    if last is None or last.get("config_hash") != config_hash or last.get("status") not in FAILED:
        return 1
    return attempts_made(last) + 1


def retried(record: Mapping[str, Any], *, retry: bool, rerun_failed: bool) -> bool:
    """Whether a sweep runs the ``failed`` or ``timeout`` run of ``record`` again: always with
    ``rerun_failed``, never without ``retry``, else while it has had fewer than
    :data:`~ppl_bnn.defaults.MAX_ATTEMPTS` runs."""
    if record.get("status") not in FAILED:
        return False
    return rerun_failed or (retry and attempts_made(record) < MAX_ATTEMPTS)
