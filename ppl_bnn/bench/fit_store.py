"""The shared-fit store: a content-addressed store of runs that later fits read instead of
repeating them, kept where the core lets shared runs be intercepted
(:mod:`ppl_bnn.methods.shared`).

A MAP mode is the first part of several contestants: the GGN Laplace expands around the mode of
``fit(model, "map", seed=seed)`` with the same options, and a tuned Laplace fits MAP's tuning
grid again on the same validation split. While a store is open (:func:`use_store`; the benchmark
worker opens ``<results>/fits/`` for each cell), the run of a method marked ``shared``
(:attr:`ppl_bnn.methods.base.Method.shared`) goes through the store (:func:`_through_store`): a
run whose key is in the store is read from it, any other is run and written to it.

The key is the SHA-256 of everything that determines the run: the method, the backend, the
model spec, the bytes of the training data, the method's options, the seed, the program's
variant (MC dropout's masks), the XLA flags that set how hard programs are optimised, the library
versions, the fitting code (:func:`fitting_code_key`: a run of an edited method is not read
back for the new one) and :data:`FORMAT`. A run read from the store keeps the timings of the
run that produced it, and the fit that read it adds that run's wall time to its own
(:func:`ppl_bnn.methods.shared.collect`), so a contestant's cost includes what producing each
of its parts cost, shared or not.

An entry, ``<key>.npz``, holds arrays only: every array of the run (numbered members), a
``meta`` member (UTF-8 JSON: the run's structure, which member each array is, ``timings``,
``info``, the producing run's ``seconds``, the fields that are None) and a ``sha256`` member,
the :func:`~ppl_bnn.keys.content_key` of the JSON and the arrays. It is read with
``allow_pickle=False`` and its hash checked; an entry that does not parse, needs pickle, fails
the hash or has the wrong structure is moved into ``set-aside/`` (a warning names it) and the
run is done again and rewritten. Nothing in the store is ever unpickled or executed; ``*.pkl``
entries of the old format are never opened. A run whose output is not arrays, JSON values,
tuples and numpy scalars raises :class:`TypeError` naming the field when written. Entries are
written atomically; two processes that run the same key at once both write it, the same run.
The hash catches damaged and edited entries, not forged ones: what keeps a store someone hands
you from running code is that nothing in it is unpickled.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import secrets
from collections.abc import Iterator
from dataclasses import fields
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from ppl_bnn.engine.xla import xla_optimisation_flags
from ppl_bnn.files import write_atomic
from ppl_bnn.keys import content_key, source_key
from ppl_bnn.methods import shared
from ppl_bnn.methods.output import RunOutput
from ppl_bnn.methods.shared import RunFunction
from ppl_bnn.timing import now
from ppl_bnn.versions import library_versions

logger = logging.getLogger(__name__)

#: Part of every key: bump it when what an entry holds changes.
FORMAT = 2

#: Where unreadable entries are moved, inside the store.
SET_ASIDE = "set-aside"

#: The JSON tags of what JSON has no form of: an array, a numpy scalar (by member) and a tuple.
_ARRAY, _SCALAR, _TUPLE = "__array__", "__scalar__", "__tuple__"
_TAGS = (_ARRAY, _SCALAR, _TUPLE)
_PLAIN = (type(None), bool, int, float, str)


@contextlib.contextmanager
def use_store(directory: str | Path | None) -> Iterator[None]:
    """Share runs through ``directory`` (created when first written) inside the block; None:
    do not share."""
    through = None if directory is None else partial(_through_store, Path(directory))
    with shared.intercept(through):
        yield


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
    the model with masks is never read for one without, nor for other masks; so are the XLA
    flags that set how hard the process's programs are optimised
    (:func:`~ppl_bnn.engine.xla.xla_optimisation_flags`): a run compiled at one level is never read
    for another (a suite's cells and its references may differ in it)."""
    model = target.model
    return content_key(
        FORMAT, method, target.backend, model.spec, model.x, model.y, options, seed,
        target.variant, library_versions(), fitting_code_key(), xla_optimisation_flags(),
    )  # fmt: skip


def entry_path(directory: Path, key: str) -> Path:
    """The file of ``key``'s entry in the store at ``directory``."""
    return directory / f"{key}.npz"


def _encode(value: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    """``value`` as JSON, its arrays and numpy scalars moved into ``arrays``; a TypeError
    naming ``where`` for anything else (a run the store would change)."""
    if type(value) is np.ndarray or isinstance(value, np.generic):
        if value.dtype.hasobject:
            raise TypeError(f"shared fit store: {where} holds Python objects, not numbers")
        name = f"a{len(arrays)}"
        arrays[name] = np.asarray(value)
        return {_SCALAR if isinstance(value, np.generic) else _ARRAY: name}
    if type(value) in _PLAIN:
        return value
    if type(value) in (list, tuple):
        items = [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
        return {_TUPLE: items} if type(value) is tuple else items
    if type(value) is dict:
        for k in value:
            if type(k) is not str or k in _TAGS:
                raise TypeError(f"shared fit store: {where} has the key {k!r}, not a plain str")
        return {k: _encode(v, arrays, f"{where}[{k!r}]") for k, v in value.items()}
    raise TypeError(
        f"shared fit store: {where} is a {type(value).__name__}, which cannot be stored as "
        "arrays and JSON (plain numbers, strings, lists, tuples, dicts by str, numpy arrays)"
    )


def _decode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The inverse of :func:`_encode`; each array is taken out of ``arrays`` (once)."""
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and next(iter(value)) in _TAGS:
        ((tag, inner),) = value.items()
        if tag == _TUPLE:
            return tuple(_decode(inner, arrays))
        array = arrays.pop(inner)
        return array[()] if tag == _SCALAR else array
    return {k: _decode(v, arrays) for k, v in value.items()}


def _digest(meta: np.ndarray, arrays: dict[str, np.ndarray]) -> str:
    """The SHA-256 of an entry's JSON and arrays (names, dtypes, shapes and bytes)."""
    return content_key(meta, arrays)


def _entry_bytes(output: Any, seconds: float) -> bytes:
    """The NPZ file of ``output`` (a RunOutput) produced in ``seconds``."""
    arrays: dict[str, np.ndarray] = {}
    tree = {f.name: getattr(output, f.name) for f in fields(output)}
    meta_text = json.dumps({"seconds": float(seconds), "output": _encode(tree, arrays, "run")})
    meta = np.frombuffer(meta_text.encode(), dtype=np.uint8)
    sha256 = np.array(_digest(meta, arrays))
    buffer = io.BytesIO()
    np.savez(buffer, meta=meta, sha256=sha256, **arrays)  # no object arrays: see _encode
    return buffer.getvalue()


def _parse(data: bytes) -> tuple[Any, float]:
    """``(RunOutput, seconds)`` of an entry's bytes; raises on anything but a sound entry."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta, sha256 = arrays.pop("meta"), arrays.pop("sha256")
    if meta.dtype != np.uint8 or str(sha256) != _digest(meta, arrays):
        raise ValueError("its content does not match its SHA-256")
    entry = json.loads(meta.tobytes())
    output = RunOutput(**_decode(entry["output"], arrays))
    if arrays or type(entry["seconds"]) is not float or not _holds_a_run(output):
        raise ValueError("it does not hold one run")
    return output, entry["seconds"]


def _holds_a_run(out: Any) -> bool:
    """Whether ``out``'s fields have the types :class:`~ppl_bnn.methods.base.RunOutput` says."""

    def arrays(value: Any) -> bool:
        return isinstance(value, dict) and all(isinstance(a, np.ndarray) for a in value.values())

    groups = [out.draws, out.sample_stats, out.linearised_at or {}]
    groups += list((out.variational or {}).values())
    return (
        isinstance(out.timings, dict)
        and isinstance(out.info, dict)
        and isinstance(out.losses, np.ndarray | None)
        and isinstance(out.variational, dict | None)
        and all(arrays(group) for group in groups)
    )


def _read(path: Path) -> tuple[Any, float] | None:
    """The entry at ``path``, None where there is none; one that is not sound is set aside."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return _parse(data)
    except Exception as err:  # never trusted: set aside, and the run done again
        _set_aside(path, f"{type(err).__name__}: {err}")
        return None


def _set_aside(path: Path, reason: str) -> None:
    """Move the entry at ``path`` into the store's :data:`SET_ASIDE` folder, with a warning."""
    aside = path.parent / SET_ASIDE / f"{path.name}.{secrets.token_hex(4)}"
    aside.parent.mkdir(exist_ok=True)
    with contextlib.suppress(FileNotFoundError):  # another process moved or replaced it
        path.rename(aside)
    logger.warning("shared fit %s is unsound (%s): set aside as %s; running it again",
                   path, reason, aside)  # fmt: skip


def _through_store(
    directory: Path,
    method: str,
    run: RunFunction,
    name: str,
    target: Any,
    options: Any,
    seed: int,
) -> Any:
    """``run``'s output from the store at ``directory`` where its key is there (noted for
    ``fit``'s count, :func:`ppl_bnn.methods.shared.record_reused`), else run and written."""
    key = run_key(method, target, options, seed)
    path = entry_path(directory, key)
    entry = _read(path)
    if entry is not None:
        output, seconds = entry
        shared.record_reused({"key": key, "method": method, "seconds": seconds})
        logger.debug("%s: %s's run read from the shared fits (%s)", name, method, key)
        return output
    start = now()
    out = run(name, target, options, seed)
    data = _entry_bytes(out, now() - start)
    write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))
    return out
