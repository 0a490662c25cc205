"""Results a run would overwrite with results of other data: set aside whole, never deleted.

A cell refitted on other data than its stored result was fit on (a results folder reused for
another file of the same name, or a data copy that had been altered), or a reference published
over one of another key, would otherwise take the old result's place. The old folder is moved
instead into ``<results>/replaced/<kind>/<name>~<time>/`` with a ``replaced.json`` saying what
it was and why it was set aside, and :func:`read_replaced` lists them for the report's Summary.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from ppl_bnn.bench.environment import timestamp
from ppl_bnn.bench.record import REPLACED_DIR
from ppl_bnn.files import write_atomic

logger = logging.getLogger(__name__)
#: What each set-aside folder holds beside its old contents.
NOTE_FILE = "replaced.json"
#: The kinds of results set aside, each a folder of :data:`REPLACED_DIR`.
KINDS = ("cells", "references")


def set_aside(folder: Path, results_dir: Path, kind: str, reason: str) -> Path:
    """Move ``folder`` (a cell's or a published reference's) into ``results_dir``'s
    :data:`REPLACED_DIR`, with a note of ``reason``; return where it went."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    when = timestamp()
    stamp = when.replace(":", "").replace("+0000", "Z")
    target = results_dir / REPLACED_DIR / kind / f"{folder.name}~{stamp}-{secrets.token_hex(2)}"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(folder, target)
    note = {"kind": kind, "name": folder.name, "replaced_at": when, "reason": reason}
    text = json.dumps(note, indent=2)
    write_atomic(target / NOTE_FILE, lambda tmp: Path(tmp).write_text(text))
    logger.warning("%s: %s; the earlier result is kept in %s", folder.name, reason, target)
    return target


def read_replaced(results_dir: Path) -> list[dict[str, Any]]:
    """The notes of everything set aside in ``results_dir``, oldest first, each with its
    ``folder`` (relative to ``results_dir``); unreadable notes are skipped."""
    notes = []
    for path in (Path(results_dir) / REPLACED_DIR).glob(f"*/*/{NOTE_FILE}"):
        try:
            note = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(note, dict):
            notes.append({**note, "folder": str(path.parent.relative_to(results_dir))})
    return sorted(notes, key=lambda note: str(note.get("replaced_at")))
