"""New Python processes that never run the user's script again.

``multiprocessing`` prepares every new process it starts by ``spawn`` or ``forkserver`` with
the parent's main module (its path or module name), which the child imports as
``__mp_main__``, so that functions defined there can be unpickled. A script whose top level
calls ``compare`` without an ``if __name__ == "__main__":`` guard would then run again, whole,
in that child. The processes this package starts run its own functions only, so they need none
of it: :func:`without_main_module` drops it from their preparation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from multiprocessing import spawn
from typing import Any

#: The preparation entries through which a new process imports its parent's main module.
MAIN_ENTRIES = ("init_main_from_path", "init_main_from_name")


def without_main(data: dict[str, Any]) -> dict[str, Any]:
    """Preparation data ``data`` without the parent's main module."""
    return {key: value for key, value in data.items() if key not in MAIN_ENTRIES}


@contextlib.contextmanager
def without_main_module() -> Iterator[None]:
    """Processes started by ``spawn`` in this block do not import the parent's main module.

    Their preparation data are made in this process when each starts
    (``spawn.get_preparation_data``), so the block must hold the starts themselves (for a
    ``ProcessPoolExecutor``: its ``submit`` calls)."""
    original = spawn.get_preparation_data
    spawn.get_preparation_data = lambda name: without_main(original(name))
    try:
        yield
    finally:
        spawn.get_preparation_data = original
