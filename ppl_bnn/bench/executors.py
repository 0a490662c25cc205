"""Where cells run: a local pool of worker processes, or a Dask cluster.

Both are :class:`concurrent.futures.Executor` s whose tasks call
:func:`ppl_bnn.bench.process.run_cell_process`, which starts one child process per cell. The
local pool uses threads to wait on those children; Dask ships the same call to its workers
(through ``distributed``'s ``ClientExecutor``), which must see the same results directory.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor

#: How long to wait for a Dask scheduler to answer before giving up.
DASK_CONNECT_TIMEOUT = "30s"


@contextlib.contextmanager
def local_executor(jobs: int) -> Iterator[Executor]:
    """``jobs`` cells at a time on this machine."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="cell") as pool:
        yield pool


@contextlib.contextmanager
def dask_executor(address: str) -> Iterator[Executor]:
    """Cells on the Dask cluster at ``address`` (e.g. ``tcp://scheduler:8786``)."""
    try:
        from distributed import Client
    except ImportError as err:  # pragma: no cover - distributed is a dependency
        raise RuntimeError("the Dask executor needs the 'distributed' package") from err
    try:
        client = Client(address, timeout=DASK_CONNECT_TIMEOUT)
    except OSError as err:
        raise ConnectionError(f"cannot reach the Dask scheduler at {address}: {err}") from err
    try:
        yield client.get_executor(pure=False)
    finally:
        client.close()
