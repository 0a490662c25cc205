"""Gold-standard reference posteriors: their settings, cache key, convergence gate and record.

A reference is a long NumPyro NUTS run (by default 4 chains of 1,000 warm-up + 1,000 kept draws,
tree depth <= 10) of a suite's model on one (dataset, split). It is trusted only when it has
converged in function space: R-hat <= 1.01 and bulk ESS >= 400 of the predictive at the test
inputs (weight-space R-hat never converges for BNNs, whose posteriors are symmetric under
permutations and sign flips of hidden units).

References are expensive and depend only on what they are computed from, so they are cached by
content: the key is the SHA-256 of the reference cell's config, a fingerprint of the loaded data
arrays, the versions of numpyro, jax and jaxlib, and :data:`CACHE_FORMAT`. An entry
``<root>/<key>/`` holds the cell's ``record.json``, ``predictions.nc`` and
``inference_data.nc`` and this module's ``reference.json``::

    {"format": 1, "key": "<sha256>" or null, "dataset": "sine", "split": 0,
     "status": "ok" | "diverged" | "failed" | "timeout" | "infeasible",
     "note": why there is no reference, what failed, or which gate criterion failed; or null,
     "converged": true | false | null (no fit),
     "gate": {"rhat_max": 1.01, "ess_bulk_min": 400},
     "diagnostics": {"rhat_max": ..., "rhat_median": ..., "ess_bulk_min": ...,
                     "ess_bulk_median": ..., "ess_tail_min": ..., "divergences": ...,
                     "max_tree_depth_share": ...},
     "settings": {"num_chains": 4, "num_warmup": 1000, "num_samples": 1000,
                  "max_tree_depth": 10, "target_accept": 0.8, "seed": 0, "timeout_s": 1800,
                  "stored_draws": 1000},
     "model": {...}, "timings": {...}, "versions": {...}, "computed_at": "...", "wall_s": ...}

The cache root is an explicit directory, else ``$PPL_BNN_REFERENCE_DIR``, else
``$XDG_CACHE_HOME/ppl_bnn/references``, else ``~/.cache/ppl_bnn/references``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.data import Dataset
from ppl_bnn.files import netcdf_problem, write_atomic
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)

__all__ = [
    "CACHE_FORMAT",
    "ENV_VAR",
    "FORMAT",
    "GATE",
    "REFERENCES_DIR",
    "REFERENCE_FILE",
    "STORED_DRAWS",
    "ReferenceSettings",
    "add_reference_file",
    "cache_root",
    "cached_reference",
    "data_fingerprint",
    "describe_reference",
    "gate_failures",
    "is_converged",
    "read_reference",
    "reference_document",
    "reference_key",
    "write_reference",
]

#: Format of ``reference.json``.
FORMAT = 1
#: Part of every cache key: bump it when what an entry holds changes, to leave old entries unused.
CACHE_FORMAT = 1
#: Environment variable naming the cache root.
ENV_VAR = "PPL_BNN_REFERENCE_DIR"
REFERENCE_FILE = "reference.json"
#: The folder of a suite's results that holds a copy of each of its references.
REFERENCES_DIR = "references"
#: Draws of the test predictive a reference keeps in ``predictions.nc`` (cells keep 200).
STORED_DRAWS = 1000
#: Function-space convergence: the largest R-hat and the smallest bulk ESS allowed.
GATE: dict[str, float] = {"rhat_max": 1.01, "ess_bulk_min": 400}
#: The cell metrics copied into ``reference.json`` as its diagnostics.
DIAGNOSTICS = (
    "rhat_max", "rhat_median", "ess_bulk_min", "ess_bulk_median", "ess_tail_min", "divergences",
    "max_tree_depth_share",
)  # fmt: skip
#: Libraries whose versions are part of the cache key.
KEY_VERSIONS = ("numpyro", "jax", "jaxlib")
#: Statuses of a run that produced draws; ``failed``, ``timeout`` and ``infeasible`` did not.
_FIT_STATUSES = ("ok", "diverged")
#: Statuses of a reference that has predictions.
_FITTED_STATUSES = ("ok", "diverged")
#: A cell's predictions file (a reference's cache entry is a cell's folder).
PREDICTIONS_FILE = "predictions.nc"


@dataclass(frozen=True)
class ReferenceSettings:
    """How a suite's references are sampled (NumPyro NUTS) and how long one may take.

    Attributes:
        num_chains, num_warmup, num_samples, max_tree_depth, target_accept: NUTS options.
        seed: The fit's seed.
        timeout_s: Wall-clock limit of one reference's process.
    """

    num_chains: int = 4
    num_warmup: int = 1000
    num_samples: int = 1000
    max_tree_depth: int = 10
    target_accept: float = 0.8
    seed: int = 0
    timeout_s: float = 1800.0

    def nuts_options(self) -> dict[str, Any]:
        """The options passed to ``fit(..., method="nuts", backend="numpyro")``."""
        return {
            "num_chains": self.num_chains,
            "num_warmup": self.num_warmup,
            "num_samples": self.num_samples,
            "max_tree_depth": self.max_tree_depth,
            "target_accept": self.target_accept,
        }

    def as_dict(self) -> dict[str, Any]:
        """Every setting and the draws kept, as stored in ``suite.json`` and ``reference.json``."""
        return {**asdict(self), "stored_draws": STORED_DRAWS}


def cache_root(directory: str | os.PathLike[str] | None = None) -> Path:
    """The cache root: ``directory``, else ``$PPL_BNN_REFERENCE_DIR``, else
    ``$XDG_CACHE_HOME/ppl_bnn/references``, else ``~/.cache/ppl_bnn/references`` (absolute;
    ``~`` expanded; it need not exist)."""
    if directory is None:
        directory = os.environ.get(ENV_VAR) or None
    if directory is None:
        base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
        directory = Path(base) / "ppl_bnn" / "references"
    return Path(directory).expanduser().absolute()


def data_fingerprint(data: Dataset) -> str:
    """SHA-256 of the training and test arrays as loaded (dtype, shape and bytes of each)."""
    digest = hashlib.sha256()
    for name in ("x_train", "y_train", "x_test", "y_test"):
        array = np.ascontiguousarray(getattr(data, name))
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def reference_key(
    config: Mapping[str, Any], fingerprint: str, versions: Mapping[str, str] | None = None
) -> str:
    """The cache key of a reference.

    Args:
        config: The reference cell's config (dataset, split, model, NUTS options, data limits,
            seed, stored draws): :meth:`ppl_bnn.bench.cell.Cell.config`.
        fingerprint: :func:`data_fingerprint` of the data it is fitted to.
        versions: Library versions (default: those installed); only :data:`KEY_VERSIONS` count.
    """
    versions = library_versions() if versions is None else versions
    payload = {
        "cache_format": CACHE_FORMAT,
        "config": config,
        "data": fingerprint,
        "versions": {name: versions.get(name) for name in KEY_VERSIONS},
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing or not finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def gate_failures(diagnostics: Mapping[str, Any]) -> list[str]:
    """What keeps ``diagnostics`` from passing :data:`GATE` (empty when it passes); a missing or
    non-finite diagnostic fails."""
    rhat, ess = _finite(diagnostics.get("rhat_max")), _finite(diagnostics.get("ess_bulk_min"))
    failures = []
    if rhat is None or rhat > GATE["rhat_max"]:
        failures.append(f"R-hat max {_show(rhat, '.3f')} > {GATE['rhat_max']:g}")
    if ess is None or ess < GATE["ess_bulk_min"]:
        failures.append(f"bulk ESS min {_show(ess, '.0f')} < {GATE['ess_bulk_min']:g}")
    return failures


def _show(value: float | None, spec: str) -> str:
    return "missing" if value is None else format(value, spec)


def is_converged(status: str, diagnostics: Mapping[str, Any]) -> bool | None:
    """True iff ``status`` is ``ok`` and the diagnostics pass :data:`GATE`; None without a fit
    (``failed``, ``timeout``, ``infeasible``)."""
    if status not in _FIT_STATUSES:
        return None
    return status == "ok" and not gate_failures(diagnostics)


def describe_reference(document: Mapping[str, Any]) -> str:
    """One line on a ``reference.json``: status, R-hat max and bulk ESS min, and whether it
    converged; or why there is no reference."""
    status, note = document["status"], document["note"]
    if document["converged"] is None:
        return f"{status}: {note}"
    diagnostics = document["diagnostics"]
    shown = (
        f"R-hat max {_show(diagnostics['rhat_max'], '.3f')}, "
        f"bulk ESS min {_show(diagnostics['ess_bulk_min'], '.0f')}"
    )
    verdict = "converged" if document["converged"] else "not converged"
    return f"{status}; {shown}; {verdict}" + (f" ({note})" if status != "ok" and note else "")


def reference_document(
    dataset: str,
    split: int,
    *,
    settings: Mapping[str, Any],
    model: Mapping[str, Any],
    computed_at: str,
    key: str | None = None,
    record: Mapping[str, Any] | None = None,
    status: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """The ``reference.json`` of one (dataset, split).

    Args:
        dataset, split: What the reference is of.
        settings: :meth:`ReferenceSettings.as_dict`.
        model: The suite's :class:`ppl_bnn.BNN` keyword arguments for the dataset.
        computed_at: When (ISO 8601); a record's ``finished_at`` takes its place.
        key: The cache key, or None where there is no entry (infeasible, data not loadable).
        record: The reference cell's record, when it ran: status, diagnostics, timings and
            versions come from it.
        status, note: Without a record: ``infeasible`` or ``failed``, and why.
    """
    record = record or {}
    status = record.get("status", status)
    if status is None:
        raise ValueError("reference_document needs a record or a status")
    metrics = record.get("metrics") or {}
    diagnostics = {name: _finite(metrics.get(name)) for name in DIAGNOSTICS}
    converged = is_converged(status, diagnostics)
    error = record.get("error")
    if error:
        note = f"{error.get('type')}: {error.get('message')}"
    elif converged is False:
        note = "not converged: " + "; ".join(gate_failures(diagnostics) or [f"status {status}"])
    timings = record.get("timings") or {}
    return {
        "format": FORMAT,
        "key": key,
        "dataset": dataset,
        "split": split,
        "status": status,
        "note": note,
        "converged": converged,
        "gate": dict(GATE),
        "diagnostics": diagnostics,
        "settings": dict(settings),
        "model": dict(model),
        "timings": dict(timings),
        "versions": dict(record.get("versions") or library_versions()),
        "computed_at": record.get("finished_at") or computed_at,
        "wall_s": _finite(timings.get("cell_wall")),
        # The runs it took (see ppl_bnn.bench.record.attempts_made).
        "attempt": record.get("attempt", 1),
    }


def write_reference(directory: Path, document: Mapping[str, Any]) -> Path:
    """Atomically write ``reference.json`` into ``directory``."""
    text = json.dumps(document, indent=2, allow_nan=False)
    path = Path(directory) / REFERENCE_FILE
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
    return path


def read_reference(directory: Path) -> dict[str, Any] | None:
    """The ``reference.json`` in ``directory``, or None when there is none, it does not parse or
    it has another format."""
    path = Path(directory) / REFERENCE_FILE
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return document if isinstance(document, dict) and document.get("format") == FORMAT else None


def cached_reference(root: Path, key: str) -> dict[str, Any] | None:
    """The cached ``reference.json`` under ``key`` (a failed one too: whether it is tried again
    is the sweep's choice), or None when it must be computed: there is no entry, or it is
    damaged (a fit whose ``predictions.nc`` is missing, unreadable or truncated: verified on
    every read, as a sweep verifies its cells)."""
    entry = Path(root) / key
    document = read_reference(entry)
    if document is None:
        return None
    if document["status"] in _FITTED_STATUSES and (
        reason := netcdf_problem(entry / PREDICTIONS_FILE)
    ):
        logger.warning("cached reference %s: %s %s: computing it again", key, PREDICTIONS_FILE,
                       reason)  # fmt: skip
        return None
    return document


def add_reference_file(
    directory: Path, record: Mapping[str, Any], *, key: str, settings: Mapping[str, Any]
) -> None:
    """Write the ``reference.json`` of the reference cell whose ``record`` is in ``directory``
    (the cell's staging directory, before it becomes the cache entry)."""
    config = record["config"]
    document = reference_document(
        config["dataset"],
        config["split"],
        settings=settings,
        model=config["model"],
        computed_at=record["finished_at"],
        key=key,
        record=record,
    )
    write_reference(directory, document)
