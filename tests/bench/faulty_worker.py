"""The pool's worker with faults injected, for tests: ``pool.WORKER_MODULE`` set to this module.

``$PPL_BNN_TEST_FAULTS`` maps cell ids to what their worker does instead of running them:
``"exit"`` (``os._exit(3)``), ``"segfault"`` (reads address 0) or ``"hang"`` (sleeps until
killed). Every other cell runs as in :mod:`ppl_bnn.bench.worker`.

``$PPL_BNN_TEST_START_DELAY`` (seconds) delays a worker's start: the worker imports this
module before it says it is ready.
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from typing import Any

from ppl_bnn.bench import worker
from ppl_bnn.bench.cell import cell_from_dict

FAULTS_VAR = "PPL_BNN_TEST_FAULTS"
START_DELAY_VAR = "PPL_BNN_TEST_START_DELAY"
time.sleep(float(os.environ.get(START_DELAY_VAR, "0")))
_run_task = worker.run_task


def run_task(task: dict[str, Any], threads: int) -> dict[str, Any]:
    fault = json.loads(os.environ.get(FAULTS_VAR, "{}")).get(cell_from_dict(task["cell"]).cell_id)
    if fault == "exit":
        os._exit(3)
    if fault == "segfault":
        ctypes.string_at(0)
    if fault == "hang":
        time.sleep(3600)
    return _run_task(task, threads)


def main(*args: Any) -> None:
    """:func:`ppl_bnn.bench.worker.main` with the faults above."""
    worker.main(*args, run_task=run_task)
