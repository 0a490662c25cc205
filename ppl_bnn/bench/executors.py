"""Where cells run: a local pool of worker processes, or a Dask cluster.

Both are :class:`concurrent.futures.Executor` s whose tasks call
:func:`ppl_bnn.bench.process.run_cell_process`, which starts one child process per cell. The
local pool uses threads to wait on those children; Dask ships the same call to its workers
(through ``distributed``'s ``ClientExecutor``), which must see the same results directory.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

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
    client = _connect(Client, address)
    try:
        yield client.get_executor(pure=False)
    finally:
        client.close()


def _connect(client_class: Any, address: str) -> Any:
    """``Client(address)``, within :data:`DASK_CONNECT_TIMEOUT` whatever answers on the port.

    ``distributed``'s own timeout covers the connection, not the handshake after it: a server
    that accepts the connection but is not a Dask scheduler (a dashboard port, any other TCP
    service) kept it waiting for minutes, and one that answers HTTP made it read a length
    header out of the reply and fail allocating exabytes. The client is made in a thread that
    is given up on at the limit; any error it meets is a ``ConnectionError`` naming the
    address.
    """
    limit = float(str(DASK_CONNECT_TIMEOUT).removesuffix("s"))
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            # Not the process's default scheduler: a client that fails halfway would otherwise
            # leave Dask (and xarray's file locks) pointed at the address it could not reach.
            outcome["client"] = client_class(
                address, timeout=DASK_CONNECT_TIMEOUT, set_as_default=False
            )
        except Exception as err:  # reported to the caller below, whatever it is
            outcome["error"] = err

    thread = threading.Thread(target=connect, name="dask-connect", daemon=True)
    thread.start()
    thread.join(limit + 5.0)
    if thread.is_alive():
        raise ConnectionError(
            f"cannot reach a Dask scheduler at {address}: nothing answered as one within "
            f"{DASK_CONNECT_TIMEOUT} (is it a Dask scheduler's address, not its dashboard's?)"
        )
    if "error" in outcome:
        err = outcome["error"]
        raise ConnectionError(
            f"cannot reach the Dask scheduler at {address}: {type(err).__name__}: {err}"
        ) from err
    return outcome["client"]
