"""Process-wide runtime settings, to be applied once at an entry point.

JAX reads its host device count when it first starts, and torch's intra-op thread pool is shared by
everything in the process, so neither is ever changed inside :func:`ppl_bnn.fit`. Entry points (a
script, the test suite, a benchmark worker) call :func:`configure_runtime` first. JAX's persistent
compilation cache is the exception: it is on by default, and its setting applies from the next
NumPyro fit (see :mod:`ppl_bnn.backends.numpyro.compile_cache`). Each backend that declares a
``runtime`` module applies the settings its framework reads (``configure(settings)``).
"""

from __future__ import annotations

import logging
import os

from ppl_bnn import devices
from ppl_bnn.engine.registry import backend_names, declaration, get_module
from ppl_bnn.engine.xla import check_xla_optimisation

logger = logging.getLogger(__name__)


def configure_runtime(
    *,
    host_devices: int | None = None,
    torch_threads: int | None = None,
    jax_cache: str | os.PathLike[str] | bool | None = None,
    device: str | None = None,
    xla_optimisation: str | None = None,
) -> None:
    """Set JAX's CPU device count (for parallel NumPyro chains), torch's intra-op threads, the
    directory of JAX's persistent compilation cache and how hard XLA optimises on the CPU.

    Args:
        host_devices: Number of XLA CPU devices; must be set before JAX is first used.
        torch_threads: torch intra-op threads; when several fits run at once, use
            ``cores // concurrent_processes`` so they never oversubscribe the cores.
        jax_cache: Where NumPyro fits keep compiled programs: a directory, ``False`` for no
            cache, ``True`` for the default (``$PPL_BNN_JAX_CACHE``, else
            ``~/.cache/ppl_bnn/jax``); ``None`` leaves the setting as it is. Applies from the
            next NumPyro fit; JAX is not imported here.
        device: Where fits run, on both backends: ``"cpu"``, ``"cuda"`` (refused with
            :class:`~ppl_bnn.devices.DeviceError`, naming what is missing, where torch or JAX
            cannot reach a CUDA device) or ``"auto"`` (``"cuda"`` where both can, else
            ``"cpu"``); ``None`` leaves it as it is (``"cpu"`` unless set). ``"cuda"`` and
            ``"auto"`` start JAX, so give ``host_devices`` in the same call or before; they
            also turn off JAX's preallocation of GPU memory (``XLA_PYTHON_CLIENT_PREALLOCATE``,
            unless set), so that several processes can share a GPU. The resolved device is
            passed on to the processes this one starts (benchmark and ``compare`` workers)
            through ``$PPL_BNN_DEVICE``. Draws, metrics and saved results are numpy arrays on
            the host either way.
        xla_optimisation: One of :data:`~ppl_bnn.engine.xla.XLA_OPTIMISATION`: ``"low"`` for
            small networks, whose fits spend most of their time compiling; ``"full"`` (XLA's
            defaults) for fits that run long; ``None`` leaves it as it is. It sets
            ``$XLA_FLAGS``, which the processes this one starts inherit, and must be given
            before JAX first runs a program.

    Raises:
        ValueError: An unknown ``device`` or ``xla_optimisation``, or ``host_devices`` /
            ``torch_threads`` below 1.
        DeviceError: ``device="cuda"`` where torch or JAX has no CUDA device.
        RuntimeError: ``xla_optimisation`` after JAX started its backend.
    """
    for name, value in (("host_devices", host_devices), ("torch_threads", torch_threads)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if xla_optimisation is not None:
        check_xla_optimisation(xla_optimisation)
    settings = {
        "host_devices": host_devices,
        "torch_threads": torch_threads,
        "jax_cache": jax_cache,
        "xla_optimisation": xla_optimisation,
    }
    for backend in backend_names():  # each applies what its framework reads
        if "runtime" in declaration(backend).modules:
            get_module(backend, "runtime").configure(settings)
    if device is not None:
        _use_device(devices.check_device(device))
    logger.debug(
        "runtime: host_devices=%s torch_threads=%s jax_cache=%s device=%s xla_optimisation=%s",
        host_devices,
        torch_threads,
        jax_cache,
        devices.current(),
        xla_optimisation,
    )


def _use_device(device: str) -> None:
    """Resolve ``device`` against what each backend's framework can reach and place both there;
    a CPU process asked for the CPU is left exactly as it is."""
    if device == "cpu" and devices.current() == "cpu":
        return
    missing: dict[str, str] = {}
    if device != "cpu":
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        for backend in backend_names():
            reason = get_module(backend, "device").cuda_missing()
            if reason is not None:
                missing[backend] = reason
    if device == "cuda" and missing:
        reasons = "; ".join(missing.values())
        raise devices.DeviceError(
            f"device='cuda' needs a CUDA device in both torch and JAX: {reasons}. On a GPU "
            "machine install their CUDA builds (see the cuda extra in pyproject.toml), or use "
            "device='cpu'"
        )
    resolved = "cuda" if device != "cpu" and not missing else "cpu"
    if device == "auto":
        logger.info(
            "device='auto' runs on %s%s",
            resolved,
            f" ({'; '.join(missing.values())})" if missing else "",
        )
    os.environ[devices.ENV_VAR] = resolved
    if resolved == devices.current():
        return
    for backend in backend_names():
        get_module(backend, "device").use(resolved)
    devices.set_current(resolved)
