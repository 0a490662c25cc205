"""What the pool's fork server imports before it forks any worker (:mod:`ppl_bnn.bench.pool`):
torch, JAX and everything else a cell needs (:func:`ppl_bnn.bench.worker.preload`), so that a
new worker starts in a fraction of a second instead of importing them for seconds. Nothing
here starts JAX's or torch's runtime (no XLA client, no thread pool): each worker sets its own
thread budget and device count first.

A worker never runs the script that started the sweep. ``multiprocessing`` sends each new
process the parent's main module (its path or module name) and imports it there as
``__mp_main__``, so that functions defined in it can be unpickled; a script whose top level
calls ``compare`` without an ``if __name__ == "__main__":`` guard would then run again in every
worker. A worker needs nothing from it (its tasks are JSON, its code is this package), so the
fork server drops the main module from the preparation of every process named
:data:`~ppl_bnn.bench.pool.WORKER_NAME` (:mod:`ppl_bnn.processes`); other processes it forks are
prepared as usual.
"""

from __future__ import annotations

from multiprocessing import spawn
from typing import Any

from ppl_bnn.bench import worker
from ppl_bnn.bench.pool import WORKER_NAME
from ppl_bnn.processes import without_main

_prepare = spawn.prepare


def _prepare_without_main(data: dict[str, Any]) -> None:
    """``multiprocessing.spawn.prepare``, without the parent's main module for a worker."""
    _prepare(without_main(data) if data.get("name") == WORKER_NAME else data)


spawn.prepare = _prepare_without_main
worker.preload()
