"""Read a suite's stored results: ``suite.json``, cell records and their netCDF files.

Whatever cannot be read, or cannot be vouched for, is listed in :attr:`SuiteResults.problems`
(the report's Problems box) instead of being dropped silently: a missing or unreadable
``suite.json``, cell record or reference, a missing or unreadable netCDF file, and cells stored
with another configuration than the suite's (``suite.json``'s ``configs``: an earlier version
of the suite, mixed in by a partial rerun).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ppl_bnn.bench.cell import (
    Cell,
    base_method,
    cell_from_dict,
    contestant_label,
    dataset_label,
)
from ppl_bnn.bench.lock import LOCK_FILE, is_held
from ppl_bnn.bench.record import (
    PREDICTIONS_FILE,
    RECORD_FILE,
    SUITE_FILE,
    RecordError,
    cell_dirs,
    holds_results,
    load_record,
    read_attempts,
)
from ppl_bnn.bench.replaced import read_replaced
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.files import netcdf_problem
from ppl_bnn.methods import method_names
from ppl_bnn.methods.base import Family
from ppl_bnn.report.fmt import first_line
from ppl_bnn.report.reference_entries import ReferenceEntry, read_references

logger = logging.getLogger(__name__)

#: Identity columns of the cells frame, in order.
ID_COLUMNS = ("cell_id", "suite", "dataset", "split", "method", "backend", "seed")
#: Canonical order of methods in tables, legends and colours: the method table's
#: (:data:`ppl_bnn.methods.METHODS`); methods not in it follow alphabetically.
METHOD_ORDER = method_names()
#: Backends in the registry's order (the built-in ones first).
BACKEND_ORDER = backend_names()
#: Methods whose draws come from Markov chains: they get the sampler diagnostics tables.
SAMPLERS = method_names(Family.MARKOV_CHAIN)
_REGRESSION_KEYS = {"rmse", "test_ll", "crps", "coverage_90"}
_CLASSIFICATION_KEYS = {"accuracy", "nll", "brier", "ece"}


def method_key(method: str) -> tuple[int, str]:
    """Sort key putting methods in :data:`METHOD_ORDER`, a tuned contestant (``map (tuned)``)
    right after its method."""
    base = base_method(method)
    order = METHOD_ORDER.index(base) if base in METHOD_ORDER else len(METHOD_ORDER)
    return order, method


def backend_key(backend: str) -> tuple[int, str]:
    """Sort key putting backends in :data:`BACKEND_ORDER`."""
    order = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else len(BACKEND_ORDER)
    return order, backend


def _sort_text(name: str | None) -> str:
    """A string that sorts methods and backends in their canonical order (a row without one,
    a performance probe's, last)."""
    if not isinstance(name, str):
        return f"{len(METHOD_ORDER) + 1:03d}"
    order, text = method_key(name) if name not in BACKEND_ORDER else backend_key(name)
    return f"{order:03d}{text}"


def _cell_value(value: Any) -> Any:
    """A config value as one CSV cell: scalars stay, lists and mappings become JSON."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, sort_keys=True)


def _number(value: Any, record: Mapping[str, Any], key: str) -> float:
    """A stored metric or timing as a float (NaN for null; logged NaN for anything else)."""
    if value is None:
        return np.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        logger.warning("%s: %s = %r is not a number", record.get("cell_id"), key, value)
        return np.nan


def _task(metrics: Mapping[str, Any]) -> str | None:
    keys = {k for k, v in metrics.items() if v is not None}
    if keys & _REGRESSION_KEYS:
        return "regression"
    if keys & _CLASSIFICATION_KEYS:
        return "classification"
    return None


def _label(config: Mapping[str, Any]) -> Any:
    """A cell's dataset as the report names it: ``mnist``, or ``mnist/lenet5`` for a variant."""
    dataset = config.get("dataset")
    return dataset_label(dataset, config.get("variant")) if dataset is not None else None


def _contestant(config: Mapping[str, Any]) -> Any:
    """A cell's method as the report names it: ``map``, or ``map (tuned)`` for a tuned cell."""
    method = config.get("method")
    return None if method is None else contestant_label(method, config.get("tune") is not None)


def is_study(record: Mapping[str, Any]) -> bool:
    """Whether a cell record is a point of a study (a suite's ``sweep``), not a contestant."""
    return (record.get("config") or {}).get("sweep") is not None


def cells_frame(records: Iterable[Mapping[str, Any]]) -> tuple[pd.DataFrame, list[str], list[str]]:
    """One row per record: ids, status, error, budget note, config, metrics, timings.

    Returns:
        The frame, the metric names (columns named as in the records) and the timing names
        (columns ``time_<name>``).
    """
    rows = []
    metric_names: dict[str, None] = {}
    timing_names: dict[str, None] = {}
    for rec in records:
        config = rec.get("config") or {}
        error = rec.get("error") or {}
        row: dict[str, Any] = {
            "cell_id": rec.get("cell_id"),
            "suite": rec.get("suite"),
            "dataset": _label(config),
            "split": config.get("split"),
            "method": _contestant(config),
            "backend": config.get("backend"),
            "seed": config.get("seed"),
            "status": rec.get("status"),
            "task": _task(rec.get("metrics") or {}),
            "error_type": error.get("type"),
            "error_message": first_line(error.get("message")),
            "budget_note": rec.get("budget_note"),
            "flags": "; ".join(rec.get("flags") or []) or None,
            "config_hash": rec.get("config_hash"),
            "started_at": rec.get("started_at"),
            "finished_at": rec.get("finished_at"),
        }
        if config.get("sweep") is not None:
            row["sweep"] = config["sweep"]
        for group in ("model", "data", "options"):
            for key, value in sorted((config.get(group) or {}).items()):
                row[f"{group}.{key}"] = _cell_value(value)
        for key, value in (rec.get("metrics") or {}).items():
            metric_names[key] = None
            row[key] = _number(value, rec, key)
        for key, value in (rec.get("timings") or {}).items():
            timing_names[key] = None
            row[f"time_{key}"] = _number(value, rec, key)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        # The identity columns even so: a suite whose only cells are a study's has none else.
        return pd.DataFrame(columns=[*ID_COLUMNS, "status"]), [], []
    metrics = list(metric_names)
    timings = list(timing_names)
    time_cols = [f"time_{t}" for t in timings]
    for col in [*metrics, *time_cols]:
        frame[col] = frame[col].astype(float)
    fixed = [c for c in frame.columns if "." not in c and c not in metrics and c not in time_cols]
    config = sorted(c for c in frame.columns if "." in c)
    frame = frame[[*fixed, *config, *metrics, *time_cols]]
    # A dataset's task is known from any cell with metrics; failed cells inherit it.
    known = frame.dropna(subset=["task"]).groupby("dataset")["task"].first()
    frame["task"] = frame["dataset"].map(known).where(frame["task"].isna(), frame["task"])
    frame = frame.sort_values(
        ["dataset", "method", "backend", "split", "seed"],
        key=lambda s: s.map(_sort_text) if s.name in ("method", "backend") else s,
    ).reset_index(drop=True)
    return frame, metrics, timings


@dataclass
class SuiteResults:
    """Everything a report reads, loaded once; netCDF files are opened on demand.

    Attributes:
        results_dir: The suite's results folder.
        suite: ``suite.json`` contents ({} when the file is missing).
        records: Cell records, sorted by cell id (study cells included).
        cells: One row per cell (see :func:`cells_frame`), the contestants only: every table,
            ranking and per-dataset figure reads this.
        sweeps: One row per cell of a study (a suite's ``sweep``; its ``sweep`` column names
            the swept option), kept out of ``cells``; shown only in the report's studies.
        metric_names: Metric columns of ``cells``, in first-seen order.
        timing_names: Timing keys; their columns are ``time_<key>``.
        references: Reference posteriors by (dataset, split) (see :class:`ReferenceEntry`).
        problems: What could not be read or cannot be vouched for, one sentence each.
        attempts: By cell id, the records of reruns that failed and left the cell's earlier
            result in place (oldest first).
        replaced: The notes of earlier results set aside because another took their place
            (:func:`ppl_bnn.bench.replaced.read_replaced`), oldest first.
    """

    results_dir: Path
    suite: dict[str, Any]
    records: list[dict[str, Any]]
    cells: pd.DataFrame
    metric_names: list[str]
    timing_names: list[str]
    references: dict[tuple[str, int], ReferenceEntry] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    attempts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    sweeps: pd.DataFrame = field(default_factory=pd.DataFrame)
    progress: str = ""
    replaced: list[dict[str, Any]] = field(default_factory=list)
    _by_id: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {r["cell_id"]: r for r in self.records}

    @property
    def name(self) -> str:
        """The suite's name (from ``suite.json``, else from the records or the folder)."""
        if self.suite.get("name"):
            return str(self.suite["name"])
        suites = {r.get("suite") for r in self.records if r.get("suite")}
        return next(iter(suites)) if len(suites) == 1 else self.results_dir.name

    def regions(self, dataset: str) -> dict[str, str]:
        """Names of the parts a dataset's test set is scored on apart (``{"in": ..., "out":
        ...}``; empty when it has none), from its cells' records."""
        for cell_id in self.cells.loc[self.cells["dataset"] == dataset, "cell_id"]:
            regions = self.record(cell_id).get("regions")
            if regions:
                return dict(regions)
        return {}

    def references_of(self, dataset: str) -> list[ReferenceEntry]:
        """The reference posteriors of ``dataset``'s splits, by split."""
        return [e for (d, _), e in sorted(self.references.items()) if d == dataset]

    def reference_predictions(
        self, dataset: str, split: int, variables: Iterable[str] | None = None
    ) -> dict[str, np.ndarray] | None:
        """The stored predictions of the (dataset, split)'s reference posterior, or None."""
        entry = self.references.get((dataset, int(split)))
        if entry is None or not entry.usable:
            return None
        return read_netcdf(entry.folder / PREDICTIONS_FILE, variables=variables)

    def record(self, cell_id: str) -> dict[str, Any]:
        """The stored record of ``cell_id``."""
        return self._by_id[cell_id]

    def datasets(self) -> list[str]:
        """Datasets in the order they first appear in ``suite.json`` cells, else sorted."""
        present = list(dict.fromkeys(self.cells["dataset"])) if not self.cells.empty else []
        declared = [_label(c) for c in self.suite.get("cells") or [] if isinstance(c, dict)]
        order = [d for d in dict.fromkeys(declared) if d in present]
        return order + sorted(d for d in present if d not in order)

    def file_path(self, cell_id: str, kind: str) -> Path | None:
        """Path of a cell's ``inference_data`` or ``predictions`` file, if it exists."""
        files = self.record(cell_id).get("files") or {}
        name = files.get(kind)
        if not name:
            return None
        path = self.results_dir / "cells" / cell_id / name
        if not path.is_file():
            logger.warning("%s: %s listed in its record but missing", cell_id, name)
            return None
        return path

    def predictions(
        self, cell_id: str, variables: Iterable[str] | None = None
    ) -> dict[str, np.ndarray] | None:
        """The cell's stored predictions as arrays (only ``variables`` if given), or None."""
        path = self.file_path(cell_id, "predictions")
        return None if path is None else read_netcdf(path, variables=variables)

    def group(self, cell_id: str, group: str) -> dict[str, np.ndarray] | None:
        """One group of the cell's InferenceData (``posterior``, ``log_likelihood``, ...)."""
        path = self.file_path(cell_id, "inference_data")
        return None if path is None else read_netcdf(path, group=group)


def _decode(var: Any) -> np.ndarray:
    """A netCDF variable's values with the CF fill value, scale and offset applied."""
    values = var[...]
    attrs = var.attrs
    fill = attrs.get("_FillValue")
    masked = fill is not None and not np.all(np.isnan(np.asarray(fill, dtype=float)))
    if not masked and "scale_factor" not in attrs and "add_offset" not in attrs:
        return values
    out = values.astype(np.float64)
    if masked:
        out[values == fill] = np.nan
    return out * attrs.get("scale_factor", 1.0) + attrs.get("add_offset", 0.0)


def read_netcdf(
    path: Path, group: str | None = None, variables: Iterable[str] | None = None
) -> dict[str, np.ndarray] | None:
    """Data variables of a netCDF-4 file (or of one of its groups) as numpy arrays.

    Reads the HDF5 datasets directly (h5py), skipping dimension scales: far cheaper than opening
    the file through xarray, which matters for suites of hundreds of cells.
    Returns None (and logs) when the file or group cannot be read.
    """
    import h5py

    wanted = None if variables is None else set(variables)
    try:
        with h5py.File(path, "r") as handle:
            node = handle if group is None else handle.get(group)
            if node is None:
                return None
            out = {}
            for name, var in node.items():
                if not isinstance(var, h5py.Dataset) or (wanted is not None and name not in wanted):
                    continue
                if var.attrs.get("CLASS") == b"DIMENSION_SCALE":
                    continue
                out[name] = _decode(var)
            return out
    except (OSError, KeyError, ValueError, TypeError) as err:
        logger.warning("cannot read %s%s: %s", path, f" group {group}" if group else "", err)
        return None


def _read_suite_file(root: Path, problems: list[str]) -> dict[str, Any]:
    """``suite.json``, or {} with the reason in ``problems``."""
    try:
        suite = json.loads((root / SUITE_FILE).read_text())
    except FileNotFoundError:
        reason = "is missing"
    except (OSError, UnicodeDecodeError, ValueError) as err:
        reason = f"is unreadable ({type(err).__name__}: {err})"
    else:
        if isinstance(suite, dict):
            return suite
        reason = "is not a JSON object"
    problems.append(
        f"{SUITE_FILE} {reason}: the suite's description, environment and list of cells are "
        "unknown, so no cell's configuration is checked against the suite"
    )
    return {}


def _read_cells(
    root: Path, problems: list[str]
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Every readable record (each unreadable one in ``problems``), and the failed reruns kept
    beside them, by cell id; each record's netCDF files are checked."""
    records, attempts = [], {}
    for folder in cell_dirs(root):
        try:
            record = load_record(folder)
        except RecordError as err:
            problems.append(
                f"cells/{folder.name}/{RECORD_FILE} {err.reason}: this cell is left out of "
                "every table and figure"
            )
            continue
        if record["status"] == "ok" and not holds_results(record):
            problems.append(
                f"cells/{folder.name}/{RECORD_FILE} says ok but holds no metrics: this cell is "
                "left out of every table and figure, and `ppl-bnn bench` runs it again"
            )
            continue
        records.append(record)
        if tried := read_attempts(folder):
            attempts[record["cell_id"]] = tried
        for name in (record.get("files") or {}).values():
            if reason := netcdf_problem(root / "cells" / record["cell_id"] / str(name)):
                problems.append(
                    f"cells/{record['cell_id']}/{name} {reason}: what needs it (figures, "
                    "fidelity to the reference, diagnostics) is missing for this cell"
                )
    return records, attempts


def _suite_configs(suite: Mapping[str, Any]) -> tuple[dict[str, str], bool]:
    """Config hashes by cell id from ``suite.json``, and whether they cover the whole suite
    (its ``configs``) rather than only the cells of its last run (its ``cells``)."""
    configs = suite.get("configs")
    if isinstance(configs, dict):
        return {str(k): str(v) for k, v in configs.items()}, True
    out = {}
    for data in suite.get("cells") or []:
        try:
            cell = cell_from_dict(dict(data))
        except (TypeError, ValueError):
            continue
        out[cell.cell_id] = cell.config_hash()
    return out, False


def _stale_cells(
    suite: Mapping[str, Any],
    records: list[dict[str, Any]],
    problems: list[str],
    configs: tuple[Mapping[str, str], str] | None = None,
) -> set[str]:
    """The cells stored with another configuration than the suite's, or outside the suite, each
    group named in ``problems``: results of an earlier version of the suite, which no table or
    figure mixes with the current ones. The suite is ``suite.json``'s (as it last ran), or
    ``configs``: the config hash of every cell of a suite file as it is now, and its name."""
    if configs is None:
        hashes, whole = _suite_configs(suite)
        where = f"{SUITE_FILE}, as it last ran"
    else:
        hashes, whole = dict(configs[0]), True
        where = configs[1]
    if not hashes:
        return set()
    changed = [
        r["cell_id"]
        for r in records
        if r["cell_id"] in hashes and r.get("config_hash") != hashes[r["cell_id"]]
    ]
    outside = [r["cell_id"] for r in records if r["cell_id"] not in hashes] if whole else []
    for ids, what, remedy in (
        (changed, f"stored with another configuration than the suite's ({where})",
         "`ppl-bnn bench` reruns them"),
        (outside, f"outside the suite ({where})",
         "delete their folders under cells/ to leave them out"),
    ):  # fmt: skip
        if ids:
            problems.append(
                f"{len(ids)} {'cell' if len(ids) == 1 else 'cells'} {what}: results of an earlier "
                f"version of the suite, left out of every table and figure ({', '.join(ids)}); "
                f"{remedy}"
            )
    return {*changed, *outside}


#: Most pending cells named one by one in the progress note; more are counted per dataset.
SHOWN_PENDING = 12


def _pending_text(pending: list[str], planned: list[tuple[str, str, str]]) -> str:
    """The pending cells by id, or, past :data:`SHOWN_PENDING`, counted per dataset."""
    if len(pending) <= SHOWN_PENDING:
        return ", ".join(pending)
    labels = {cell_id: label for cell_id, _, label in planned}
    counts: dict[str, int] = {}
    for cell_id in pending:
        counts[labels[cell_id]] = counts.get(labels[cell_id], 0) + 1
    return ", ".join(f"{n} on {label}" for label, n in counts.items())


def sweep_progress(root: Path, suite: Mapping[str, Any], records: list[dict[str, Any]]) -> str:
    """What is done and pending of the last sweep's cells (``suite.json``'s ``cells``), where a
    sweep still holds the folder's lock or the last one stopped before its end; "" for a sweep
    that finished. A cell is pending while its folder is missing or holds a record of another
    configuration."""
    planned = []
    for data in suite.get("cells") or []:
        with contextlib.suppress(TypeError, ValueError):
            cell = cell_from_dict(dict(data))
            label = cell.label if isinstance(cell, Cell) else cell.kind  # a probe's kind
            planned.append((cell.cell_id, cell.config_hash(), label))
    # Pending: no folder yet, or a record of another configuration (a damaged record is a
    # problem of the report, not a pending cell).
    present = {folder.name for folder in cell_dirs(root)}
    stored = {r["cell_id"]: r.get("config_hash") for r in records}
    pending = [
        cell_id
        for cell_id, config, _ in planned
        if cell_id not in present or stored.get(cell_id, config) != config
    ]
    running = is_held(root / LOCK_FILE)
    if not pending and not running:
        return ""
    done = f"{len(planned) - len(pending)} of {len(planned)} cells done"
    if not running:
        head = f"The last sweep stopped before its end: {done}"
        tail = "; `ppl-bnn bench` with the same suite runs the rest."
    else:
        head = f"A sweep is running: {done}"
        tail = "; this page is updated as cells finish." if pending else ", finishing."
    if pending:
        head += f"; pending: {_pending_text(pending, planned)}"
    return head + tail


def load_results(
    results_dir: str | Path, configs: tuple[Mapping[str, str], str] | None = None
) -> SuiteResults:
    """Read ``suite.json`` and every cell record under ``results_dir``; what cannot be read, or
    is of another configuration than the suite's, is listed in the result's ``problems`` and
    left out of its tables. The suite is ``suite.json``'s, or ``configs``: the config hash of
    every cell of a suite file as it is now (by cell id) and that file's name."""
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results folder {root} does not exist")
    problems: list[str] = []
    suite = _read_suite_file(root, problems)
    records, attempts = _read_cells(root, problems)
    if not records:
        logger.warning("no cell records under %s", root / "cells")
    stale = _stale_cells(suite, records, problems, configs)
    current = [r for r in records if r["cell_id"] not in stale]
    frame, metrics, timings = cells_frame(r for r in current if not is_study(r))
    sweeps, _, _ = cells_frame(r for r in current if is_study(r))
    references = read_references(root, problems)
    results = SuiteResults(
        root, suite, records, frame, metrics, timings, references, problems, attempts, sweeps,
        sweep_progress(root, suite, records), read_replaced(root),
    )  # fmt: skip
    for problem in problems:
        logger.warning("%s: %s", root, problem)
    if not frame.empty:
        # Datasets in the suite's order, so every table lists them as the sections do.
        order = {d: i for i, d in enumerate(results.datasets())}
        frame = frame.sort_values("dataset", key=lambda s: s.map(order), kind="stable").reset_index(
            drop=True
        )
        results.cells = frame
    return results
