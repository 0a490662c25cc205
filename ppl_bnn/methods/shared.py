"""Shared fits: a content-addressed store of runs that later fits read instead of repeating them.

A MAP mode is the first part of several contestants: the GGN Laplace expands around the mode of
``fit(model, "map", seed=seed)`` with the same options, and a tuned Laplace fits MAP's tuning
grid again on the same validation split. While a store is open (:func:`use_store`; the benchmark
worker opens ``<results>/fits/`` for each cell), the runner of a method marked ``shared``
(:attr:`ppl_bnn.methods.base.Method.shared`) goes through :func:`stored`: a run whose key is in
the store is read from it, any other is run and written to it.

The key is the SHA-256 of everything that determines the run: the method, the backend, the
model spec, the bytes of the training data, the method's options, the seed, the program's
variant (MC dropout's masks), the library
versions, the fitting code (:func:`fitting_code_key`: a run of an edited method is not read
back for the new one) and :data:`FORMAT`. A run read from the store keeps the timings of the
run that produced it, and the fit that read it adds that run's wall time to its own
(:func:`collect`), so a contestant's cost includes what producing each of its parts cost,
shared or not. Entries are written atomically; two processes that run the same key at once
both write it, the same run.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ppl_bnn.files import write_atomic
from ppl_bnn.keys import content_key, source_key
from ppl_bnn.timing import now
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)

#: Part of every key: bump it when what an entry holds changes.
FORMAT = 1


@dataclass
class _Store:
    """The open store (None: runs are not shared) and the runs read in :func:`collect`."""

    directory: Path | None = None
    read: list[dict[str, Any]] | None = None


_store = _Store()


@contextlib.contextmanager
def use_store(directory: str | Path | None) -> Iterator[None]:
    """Share runs through ``directory`` (created when first written) inside the block; None:
    do not share."""
    previous = _store.directory
    _store.directory = None if directory is None else Path(directory)
    try:
        yield
    finally:
        _store.directory = previous


@contextlib.contextmanager
def collect() -> Iterator[list[dict[str, Any]]]:
    """The runs read from the store inside the block, one ``{"key", "method", "seconds"}``
    each (``seconds``: the wall time of the run that produced it)."""
    outer, _store.read = _store.read, []
    read = _store.read
    try:
        yield read
    finally:
        _store.read = outer
        if outer is not None:
            outer.extend(read)


@cache
def fitting_code_key() -> str:
    """A hash of the package's source but for the benchmark runner and the report (which fit
    nothing): what a stored run was computed by."""
    package = Path(__file__).resolve().parents[1]
    skipped = {package / "bench", package / "report"}
    files = sorted(p for p in package.rglob("*.py") if not skipped & set(p.parents))
    return source_key(files)


def run_key(method: str, target: Any, options: Any, seed: int) -> str:
    """The store's key of ``method``'s run on ``target`` with ``options`` and ``seed``; the
    target's ``variant`` (``mcdropout``'s training-time dropout) is part of it, so that a run of
    the model with masks is never read for one without, nor for other masks."""
    model = target.model
    return content_key(
        FORMAT, method, target.backend, model.spec, model.x, model.y, options, seed,
        target.variant, library_versions(), fitting_code_key(),
    )  # fmt: skip


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as handle:
            entry = pickle.load(handle)
    except FileNotFoundError:
        return None
    except Exception as err:  # a damaged entry is run again, and rewritten
        logger.warning("shared fit %s is unreadable (%s: %s); running it again", path,
                       type(err).__name__, err)  # fmt: skip
        return None
    return entry if isinstance(entry, dict) and {"output", "seconds"} <= entry.keys() else None


#: A method's runner, ``(name, target, options, seed) -> RunOutput``.
Runner = Callable[[str, Any, Any, int], Any]


def stored(method: str, run: Runner) -> Runner:
    """``run`` through the open store (see the module docstring); ``run`` itself when none is
    open."""

    def run_shared(name: str, target: Any, options: Any, seed: int) -> Any:
        directory = _store.directory
        if directory is None:
            return run(name, target, options, seed)
        key = run_key(method, target, options, seed)
        path = directory / f"{key}.pkl"
        entry = _read(path)
        if entry is not None:
            if _store.read is not None:
                _store.read.append({"key": key, "method": method, "seconds": entry["seconds"]})
            logger.debug("%s: %s's run read from the shared fits (%s)", name, method, key)
            return entry["output"]
        start = now()
        out = run(name, target, options, seed)
        data = pickle.dumps({"output": out, "seconds": now() - start})
        write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))
        return out

    return run_shared
