"""Process-wide runtime settings, to be applied once at an entry point.

JAX reads its host device count when it first starts, and torch's intra-op thread pool is shared by
everything in the process, so neither is ever changed inside :func:`ppl_bnn.fit`. Entry points (a
script, the test suite, a benchmark worker) call :func:`configure_runtime` first. JAX's persistent
compilation cache is the exception: it is on by default, and its setting applies from the next
NumPyro fit (see :mod:`ppl_bnn.backends.numpyro.compile_cache`).
"""

from __future__ import annotations

import logging
import os

from ppl_bnn.backends.numpyro.compile_cache import set_jax_cache

logger = logging.getLogger(__name__)


def configure_runtime(
    *,
    host_devices: int | None = None,
    torch_threads: int | None = None,
    jax_cache: str | os.PathLike[str] | bool | None = None,
) -> None:
    """Set JAX's CPU device count (for parallel NumPyro chains), torch's intra-op threads and the
    directory of JAX's persistent compilation cache.

    Args:
        host_devices: Number of XLA CPU devices; must be set before JAX is first used.
        torch_threads: torch intra-op threads; when several fits run at once, use
            ``cores // concurrent_processes`` so they never oversubscribe the cores.
        jax_cache: Where NumPyro fits keep compiled programs: a directory, ``False`` for no
            cache, ``True`` for the default (``$PPL_BNN_JAX_CACHE``, else
            ``~/.cache/ppl_bnn/jax``); ``None`` leaves the setting as it is. Applies from the
            next NumPyro fit; JAX is not imported here.
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
    if jax_cache is not None:
        set_jax_cache(jax_cache)
    logger.debug(
        "runtime: host_devices=%s torch_threads=%s jax_cache=%s",
        host_devices,
        torch_threads,
        jax_cache,
    )


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1
