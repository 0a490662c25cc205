"""A suite's reference jobs: planned against their content-addressed cache, computed under
the cache entry's lock, and published into a results folder (see :mod:`ppl_bnn.bench.runner`
for how a sweep runs them)."""

from __future__ import annotations

import functools
import logging
import shutil
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.lock import hold_lock
from ppl_bnn.bench.process import run_cell_process
from ppl_bnn.bench.record import (
    FAILED,
    PREDICTIONS_FILE,
    RECORD_FILE,
    retried,
)
from ppl_bnn.bench.replaced import set_aside
from ppl_bnn.bench.staging import install
from ppl_bnn.bench.suite import ReferenceJob
from ppl_bnn.data import load_dataset
from ppl_bnn.files import staging_dir
from ppl_bnn.reference import (
    REFERENCE_FILE,
    REFERENCES_DIR,
    add_reference_file,
    cached_reference,
    data_fingerprint,
    read_reference,
    reference_document,
    reference_key,
    write_reference,
)

logger = logging.getLogger(__name__)

#: What a reference's results folder gets from its cache entry (the InferenceData stays there).
_PUBLISHED = (RECORD_FILE, PREDICTIONS_FILE)


@dataclass(frozen=True)
class ReferenceOutcome:
    """One reference job's result.

    Attributes:
        name: ``<dataset>-split<k>``.
        source: ``cached``, ``computed``, ``skipped`` (the dataset's ``no_reference``) or
            ``unavailable`` (its data did not load, so it has no key).
        document: Its ``reference.json``.
    """

    name: str
    source: str
    document: dict[str, Any]

    @property
    def failed(self) -> bool:
        """True when no record came out of it: ``failed`` or ``timeout``."""
        return self.document["status"] in FAILED


@dataclass(frozen=True)
class PendingReference:
    """A reference to compute, and its cache entry's ``reference.json`` when it was planned
    (a failed one, or None)."""

    job: ReferenceJob
    key: str
    seen: dict[str, Any] | None = None


def _document(job: ReferenceJob, **fields: Any) -> dict[str, Any]:
    """The ``reference.json`` of ``job`` without a record (see
    :func:`ppl_bnn.reference.reference_document`)."""
    return reference_document(
        job.cell.label,
        job.cell.split,
        settings=job.settings.as_dict(),
        model=job.cell.model,
        computed_at=timestamp(),
        **fields,
    )


def plan_references(
    jobs: list[ReferenceJob],
    root: Path,
    *,
    data_dir: str | None = None,
    retry: bool = True,
    rerun_failed: bool = False,
) -> tuple[list[PendingReference], list[ReferenceOutcome]]:
    """Split reference jobs into those to compute and the outcomes known without computing:
    cached (a failure too, unless it is :func:`~ppl_bnn.bench.record.retried`), infeasible
    (``no_reference``) or unavailable (the data, which the key fingerprints, does not load)."""
    todo, done = [], []
    for job in jobs:
        cell = job.cell
        if job.no_reference is not None:
            document = _document(job, status="infeasible", note=job.no_reference)
            done.append(ReferenceOutcome(job.name, "skipped", document))
            continue
        try:
            data = load_dataset(cell.dataset, split=cell.split, data_dir=data_dir, **cell.data)
        except (OSError, ValueError) as err:
            document = _document(job, status="failed", note=f"{type(err).__name__}: {err}")
            done.append(ReferenceOutcome(job.name, "unavailable", document))
            continue
        key = reference_key(cell.config(), data_fingerprint(data))
        cached = cached_reference(root, key)
        if cached is None or retried(cached, retry=retry, rerun_failed=rerun_failed):
            todo.append(PendingReference(job, key, read_reference(root / key)))
        else:
            done.append(ReferenceOutcome(job.name, "cached", cached))
    return todo, done


def publish_reference(outcome: ReferenceOutcome, root: Path, results_dir: Path) -> Path:
    """Install ``<results_dir>/references/<name>/``: the outcome's ``reference.json`` and, where
    it has a cache entry, that entry's ``record.json`` and ``predictions.nc``. A fitted
    reference published there before under another key (other data, settings or versions) is
    set aside (:mod:`ppl_bnn.bench.replaced`), not overwritten."""
    final = results_dir / REFERENCES_DIR / outcome.name
    published = read_reference(final)
    if (
        published is not None
        and published.get("passed") is not None  # it has draws
        and published.get("key") != outcome.document["key"]
    ):
        set_aside(final, results_dir, "references", "another reference took its place (its "
                  "data, settings or library versions changed)")  # fmt: skip
    staging = staging_dir(final)
    key = outcome.document["key"]
    for name in _PUBLISHED if key else ():
        if (root / key / name).is_file():
            shutil.copy2(root / key / name, staging / name)
    write_reference(staging, outcome.document)
    install(staging, final)
    return final


def compute_reference(
    cell_dict: dict[str, Any], entry: str, seen: dict[str, Any] | None, **process: Any
) -> dict[str, Any] | None:
    """Compute a reference into its cache entry ``entry`` under the entry's lock, unless another
    process did while this one waited for it (the entry no longer holds ``seen``, what it held
    when the reference was planned): then return None, else the reference cell's record.

    Plain arguments, so the function can be shipped to a Dask worker; ``process`` goes to
    :func:`ppl_bnn.bench.process.run_cell_process`.
    """
    path = Path(entry)
    with hold_lock(path.with_name(f".{path.name}.lock"), wait=True):
        if read_reference(path) != seen:
            return None
        return run_cell_process(cell_dict, entry, **process)


def submit_reference(
    executor: Executor, pending: PendingReference, root: Path, **process: Any
) -> Future:
    """Compute a reference into its cache entry; its ``reference.json`` is written into the
    staging directory, so the entry appears complete or not at all."""
    finish = functools.partial(
        add_reference_file, key=pending.key, settings=pending.job.settings.as_dict()
    )
    entry = str(root / pending.key)
    cell = pending.job.cell.to_dict()
    return executor.submit(
        compute_reference, cell, entry, pending.seen, before_install=finish, **process
    )


def reference_outcome(future: Future, pending: PendingReference, root: Path) -> ReferenceOutcome:
    job = pending.job
    source = "computed"
    try:
        if future.result() is None:
            source = "cached"  # by another process, while this one waited for it
        document = read_reference(root / pending.key)
    except Exception as err:  # an executor failure must not stop the sweep
        logger.exception("reference %s: the executor failed to run it", job.name)
        document = _document(job, status="failed", note=f"{type(err).__name__}: {err}")
    if document is None:
        note = f"no {REFERENCE_FILE} in the cache entry {root / pending.key}"
        document = _document(job, status="failed", note=note)
    return ReferenceOutcome(job.name, source, document)
