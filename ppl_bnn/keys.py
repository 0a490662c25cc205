"""Content keys: the SHA-256 of what determines a result or a program, so that equal inputs
find what was computed from them before (shared fits, compiled programs, the report's memos)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np


def _plain(value: Any) -> Any:
    """A JSON form of ``value``: arrays by dtype, shape and the SHA-256 of their bytes,
    dataclasses by class and the fields that take part in their equality (not those declared
    ``compare=False``: SWAG's SGD phase's start, an argument of its programs), anything else by
    its ``repr``."""
    if isinstance(value, np.ndarray | np.generic) or hasattr(value, "__array__"):
        array = np.ascontiguousarray(np.asarray(value))
        digest = hashlib.sha256(array.tobytes()).hexdigest()
        return {"array": f"{array.dtype.str}{list(array.shape)}", "sha256": digest}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.compare}
        return {"class": type(value).__qualname__, **fields}
    return repr(value)


def content_key(*parts: Any) -> str:
    """The SHA-256 of ``parts`` (JSON-able values, numpy arrays, dataclasses of them); the same
    parts give the same key in every process."""
    text = json.dumps(parts, sort_keys=True, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()


def source_key(files: Iterable[Path], *extra: str) -> str:
    """A hash of the files' names and contents and of ``extra`` (versions): code's key, so that
    what an edited module computes is not mistaken for what the old one did."""
    digest = hashlib.sha256()
    for part in extra:
        digest.update(part.encode())
    for path in files:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()
