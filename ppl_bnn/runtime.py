"""Process-wide runtime settings, to be applied once at an entry point.

JAX reads its host device count when it first starts, and torch's intra-op thread pool is shared by
everything in the process, so neither is ever changed inside :func:`ppl_bnn.fit`. Entry points (a
script, the test suite, a benchmark worker) call :func:`configure_runtime` first.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)


def configure_runtime(*, host_devices: int | None = None, torch_threads: int | None = None) -> None:
    """Set JAX's CPU device count (for parallel NumPyro chains) and torch's intra-op threads.

    Args:
        host_devices: Number of XLA CPU devices; must be set before JAX is first used.
        torch_threads: torch intra-op threads; when several fits run at once, use
            ``cores // concurrent_processes`` so they never oversubscribe the cores.
    """
    if host_devices is not None:
        if host_devices < 1:
            raise ValueError(f"host_devices must be >= 1, got {host_devices}")
        import numpyro

        numpyro.set_host_device_count(host_devices)
    if torch_threads is not None:
        if torch_threads < 1:
            raise ValueError(f"torch_threads must be >= 1, got {torch_threads}")
        import torch

        torch.set_num_threads(torch_threads)
    logger.debug("runtime: host_devices=%s torch_threads=%s", host_devices, torch_threads)


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1
