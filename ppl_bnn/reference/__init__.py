"""Gold-standard reference posteriors: their settings, cache key, gate and record.

A reference is a chain ensemble (:mod:`ppl_bnn.reference.sample`): by default up to 512 MCLMC
chains on NumPyro, each started at its own member of a deep ensemble, sampled in batches until
its floor is fine enough or its budget is spent (:class:`ReferenceSettings`). BNN posteriors
have many modes and no chain crosses between them, so R-hat across chains never approaches 1
(weight-space R-hat cannot either: permuting hidden units or flipping their signs gives the same
network). Each chain is judged on its own in function space, stuck chains are dropped, and the
reference's resolution is measured: its *floor*, the distance between two disjoint halves of
its chains with the contestants' own fidelity metric (:mod:`ppl_bnn.reference.chains`). It
passes its :data:`GATE`, and fidelity to it ranks, where it has a floor: at least
:data:`~ppl_bnn.reference.chains.MIN_CHAINS` chains kept.

References are expensive and depend only on what they are computed from, so they are cached by
content: the key is the SHA-256 of the reference cell's config, a fingerprint of the loaded data
arrays, the versions of numpyro, jax and jaxlib, and :data:`CACHE_FORMAT`. An entry
``<root>/<key>/`` holds the cell's ``record.json``, ``predictions.nc`` and
``inference_data.nc`` and this module's ``reference.json``::

    {"format": 2, "key": "<sha256>" or null, "dataset": "sine", "split": 0,
     "status": "ok" | "diverged" | "failed" | "timeout" | "infeasible",
     "note": why there is no reference, what failed, or why it did not pass; or null,
     "passed": true | false | null (no fit),
     "gate": {"min_chains": 4},
     "diagnostics": {"chains_run": ..., "chains_kept": ..., "floor_w2": ... (original units),
                     "floor_w2_std": ... (standardised), "floor_w2_random": ...,
                     "floor_tv": ..., "floor_agreement": ..., "rhat_across": ...,
                     "rhat_within_median": ..., "ess_within_median": ..., ...},
     "settings": {"engine": "mclmc", "num_chains": 64, "chains_per_batch": 16,
                  "target_floor": 0.01, "max_seconds": 600, ..., "stored_draws": 1000},
     "model": {...}, "timings": {...}, "versions": {...}, "computed_at": "...", "wall_s": ...,
     "attempt": 1}

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
from ppl_bnn.engine.registry import DEFAULT_BACKEND, declaration
from ppl_bnn.files import netcdf_problem, write_atomic
from ppl_bnn.reference.chains import MIN_CHAINS
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)

__all__ = [
    "CACHE_FORMAT",
    "ENGINES",
    "ENGINE_DEFAULTS",
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
    "passes_gate",
    "read_reference",
    "reference_document",
    "reference_key",
    "write_reference",
]

#: Format of ``reference.json``.
FORMAT = 2
#: Part of every cache key: bump it when what an entry holds, or how its chains are computed,
#: changes, to leave old entries unused (3: the chains start from one vectorised ensemble; 4: the
#: floor at 4,000 and 8,000 fidelity draws).
CACHE_FORMAT = 4
#: Environment variable naming the cache root.
ENV_VAR = "PPL_BNN_REFERENCE_DIR"
REFERENCE_FILE = "reference.json"
#: The folder of a suite's results that holds a copy of each of its references.
REFERENCES_DIR = "references"
#: Draws of the test predictive a reference keeps in ``predictions.nc`` (cells keep 200).
STORED_DRAWS = 1000
#: What a reference must show for fidelity to it to rank: a floor, from two halves of at least
#: two kept chains each (:mod:`ppl_bnn.reference.chains`).
GATE: dict[str, float] = {"min_chains": MIN_CHAINS}
#: The floors a reference may have: W2 (original units, and standardised) for regression, total
#: variation and agreement for classification.
FLOORS = ("floor_w2", "floor_tv")
#: The cell metrics copied into ``reference.json`` as its diagnostics.
DIAGNOSTICS = (
    "chains_run", "chains_kept", "floor_w2", "floor_w2_std", "floor_w2_random",
    "floor_w2_std_random", "floor_tv", "floor_tv_random", "floor_agreement",
    "floor_agreement_random", "rhat_across", "rhat_within_median", "ess_within_median",
    "divergences", "max_tree_depth_share",
)  # fmt: skip
#: The backend a reference's chains run on: the default one, which runs every engine with
#: ensemble starts and its chains in parallel.
REFERENCE_BACKEND = DEFAULT_BACKEND
#: Libraries whose versions are part of the cache key: those its backend runs on.
KEY_VERSIONS = declaration(REFERENCE_BACKEND).packages
#: Statuses of a run that produced draws; ``failed``, ``timeout`` and ``infeasible`` did not.
_FIT_STATUSES = ("ok", "diverged")
#: Statuses of a reference that has predictions.
_FITTED_STATUSES = ("ok", "diverged")
#: A cell's predictions file and its record (a reference's cache entry is a cell's folder).
PREDICTIONS_FILE = "predictions.nc"
RECORD_FILE = "record.json"


#: Chains sampled together where the settings do not say.
CHAINS_PER_BATCH = 16
#: The samplers a reference's chains may be run by (each a method of that name on NumPyro).
ENGINES: tuple[str, ...] = ("mclmc", "mams", "nuts")
#: Each engine's warm-up and kept draws per chain where the settings leave them out, and the
#: options only it reads: MCLMC keeps every ``thinning``-th of its steps (cheap ones, one
#: gradient each); MAMS every ``thinning``-th of its Metropolis steps (two gradients each on
#: average); NUTS's draws each cost up to ``2**max_tree_depth - 1`` gradients.
ENGINE_DEFAULTS: dict[str, dict[str, Any]] = {
    "mclmc": {"num_warmup": 2000, "num_samples": 100, "thinning": 20},
    "mams": {"num_warmup": 2000, "num_samples": 100, "thinning": 10, "target_accept": 0.9},
    "nuts": {"num_warmup": 500, "num_samples": 500, "max_tree_depth": 8, "target_accept": 0.8},
}


@dataclass(frozen=True)
class ReferenceSettings:
    """How a reference's chain ensemble is sampled (see :mod:`ppl_bnn.reference.sample`) and
    how long it may take.

    Chains run in batches of ``chains_per_batch``, each batch from the members of its own deep
    ensemble (``init="ensemble"``) and vectorised; after each batch the floor is measured
    (:mod:`ppl_bnn.reference.chains`), and batches are added until it is at most
    ``target_floor``, until ``num_chains`` chains have run, or until the next batch would end
    after ``max_seconds``.

    Attributes:
        engine: ``"mclmc"``, ``"mams"`` or ``"nuts"`` (:data:`ENGINES`), on NumPyro.
        num_chains: The most chains (K).
        chains_per_batch: Chains sampled together (default :data:`CHAINS_PER_BATCH`, or
            ``num_chains`` where that is fewer).
        target_floor: The floor to reach: W2 in the model's (standardised) units for
            regression, total variation for classification.
        max_seconds: The sampling budget.
        num_warmup, num_samples: Per chain; None: the engine's default (:data:`ENGINE_DEFAULTS`,
            filled in when the settings are made).
        thinning: MCLMC's or MAMS's steps per kept draw (None: its default).
        max_tree_depth: NUTS's (None: its default).
        target_accept: NUTS's or MAMS's (None: its default).
        seed: The reference's seed (each batch a child seed of it).
        timeout_s: Wall-clock limit of one reference's process.
    """

    engine: str = "mclmc"
    num_chains: int = 512
    chains_per_batch: int | None = None
    target_floor: float = 0.01
    max_seconds: float = 600.0
    num_warmup: int | None = None
    num_samples: int | None = None
    thinning: int | None = None
    max_tree_depth: int | None = None
    target_accept: float | None = None
    seed: int = 0
    timeout_s: float = 1800.0

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; available: {', '.join(ENGINES)}")
        unread = [k for k in _ENGINE_ONLY if getattr(self, k) is not None]
        unread = [k for k in unread if k not in ENGINE_DEFAULTS[self.engine]]
        if unread:
            raise ValueError(
                f"{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} not read by the "
                f"{self.engine} engine; drop {'it' if len(unread) == 1 else 'them'}"
            )
        # Resolved here, so that a change of the defaults changes every cache key.
        for name, default in ENGINE_DEFAULTS[self.engine].items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)
        if self.chains_per_batch is None:
            object.__setattr__(self, "chains_per_batch", min(CHAINS_PER_BATCH, self.num_chains))
        if not 0 < self.chains_per_batch <= self.num_chains:
            raise ValueError(
                f"chains_per_batch must be from 1 to num_chains ({self.num_chains}), got "
                f"{self.chains_per_batch}"
            )
        for name in ("target_floor", "max_seconds", "timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")

    def engine_options(self) -> dict[str, Any]:
        """The options of one batch's ``fit(model, engine, backend=REFERENCE_BACKEND, ...)``."""
        options = {k: getattr(self, k) for k in ENGINE_DEFAULTS[self.engine]}
        options.update(num_chains=self.chains_per_batch, init="ensemble")
        if self.engine == "nuts":
            options["chain_method"] = "vectorized"
        return options

    def as_dict(self) -> dict[str, Any]:
        """Every setting and the draws kept, as stored in ``suite.json`` and ``reference.json``."""
        return {**asdict(self), "stored_draws": STORED_DRAWS}


#: The settings only one engine reads.
_ENGINE_ONLY = ("thinning", "max_tree_depth", "target_accept")


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
    """What keeps ``diagnostics`` from passing :data:`GATE` (empty when it passes): fewer kept
    chains than a floor needs, or no finite floor."""
    kept = _finite(diagnostics.get("chains_kept"))
    run = _finite(diagnostics.get("chains_run"))
    failures = []
    if kept is None or kept < GATE["min_chains"]:
        of = f" of {run:.0f}" if run is not None else ""
        failures.append(
            f"{_show(kept, '.0f')}{of} chains kept, fewer than the {GATE['min_chains']} a floor "
            "needs"
        )
    elif not any(_finite(diagnostics.get(name)) is not None for name in FLOORS):
        failures.append("no finite floor")
    return failures


def _show(value: float | None, spec: str) -> str:
    return "missing" if value is None else format(value, spec)


def passes_gate(status: str, diagnostics: Mapping[str, Any]) -> bool | None:
    """True iff ``status`` is ``ok`` and the diagnostics pass :data:`GATE`; None without a fit
    (``failed``, ``timeout``, ``infeasible``)."""
    if status not in _FIT_STATUSES:
        return None
    return status == "ok" and not gate_failures(diagnostics)


def describe_reference(document: Mapping[str, Any]) -> str:
    """One line on a ``reference.json``: status, the chains kept and the floor, and whether it
    passed its gate; or why there is no reference."""
    status, note = document["status"], document["note"]
    if document["passed"] is None:
        return f"{status}: {note}"
    found = document["diagnostics"]
    floor = next((f"floor {name.removeprefix('floor_')} {_show(found[name], '.3g')}"
                  for name in FLOORS if found.get(name) is not None), "no floor")  # fmt: skip
    shown = (
        f"{_show(found.get('chains_kept'), '.0f')} of {_show(found.get('chains_run'), '.0f')} "
        f"chains kept, {floor}"
    )
    verdict = "passed" if document["passed"] else "did not pass"
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
    passed = passes_gate(status, diagnostics)
    error = record.get("error")
    if error:
        note = f"{error.get('type')}: {error.get('message')}"
    elif passed is False:
        note = "no floor: " + "; ".join(gate_failures(diagnostics) or [f"status {status}"])
    timings = record.get("timings") or {}
    return {
        "format": FORMAT,
        "key": key,
        "dataset": dataset,
        "split": split,
        "status": status,
        "note": note,
        "passed": passed,
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
    is the sweep's choice), or None when it must be computed: there is no entry, or it is not
    whole and sound (:func:`entry_problem`, verified on every read, as a sweep verifies its
    cells); such an entry is never used."""
    entry = Path(root) / key
    document = read_reference(entry)
    if document is None:
        return None
    if problem := entry_problem(entry, key, document):
        logger.warning("cached reference %s: %s: computing it again", key, problem)
        return None
    return document


def entry_problem(entry: Path, key: str, document: Mapping[str, Any]) -> str | None:
    """Why the cache entry ``entry`` of ``key``, whose ``reference.json`` is ``document``,
    cannot be used, or None: it names another key; or, for a fit, its ``predictions.nc`` is
    missing, unreadable or truncated, its ``record.json`` is missing or unreadable, or the
    document's status, diagnostics or gate verdict do not follow from that record (a partial
    or altered entry)."""
    if document.get("key") != key:
        return f"its {REFERENCE_FILE} names the key {document.get('key')!r}"
    if document.get("status") not in _FITTED_STATUSES:
        return None
    if reason := netcdf_problem(entry / PREDICTIONS_FILE):
        return f"{PREDICTIONS_FILE} {reason}"
    try:
        record = json.loads((entry / RECORD_FILE).read_text())
    except (OSError, ValueError) as err:
        return f"its {RECORD_FILE} is missing or unreadable ({type(err).__name__})"
    metrics = record.get("metrics") if isinstance(record, dict) else None
    if not isinstance(metrics, dict) or record.get("status") != document["status"]:
        return f"its {RECORD_FILE} does not record the status {document['status']!r}"
    diagnostics = {name: _finite(metrics.get(name)) for name in DIAGNOSTICS}
    if diagnostics != document.get("diagnostics"):
        return f"its diagnostics differ from those its {RECORD_FILE} records"
    if passes_gate(document["status"], diagnostics) != document.get("passed"):
        return "its gate verdict does not follow from its diagnostics"
    return None


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
