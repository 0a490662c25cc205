"""The device fits run on, one per process: ``"cpu"`` (the default) or ``"cuda"``, chosen by
:func:`ppl_bnn.configure_runtime` (``device="cpu" | "cuda" | "auto"``) and used by both backends,
so that their costs compare on the same hardware.

Each backend's ``device`` module (``ppl_bnn/backends/<name>/device.py``) says whether its
framework can reach a CUDA device and places the framework's arrays there; draws, metrics and
saved results are numpy arrays on the host whatever the device.
"""

from __future__ import annotations

import os

#: The environment variable that carries the resolved device to the processes a process starts
#: (benchmark and ``compare`` workers apply it when they start).
ENV_VAR = "PPL_BNN_DEVICE"

#: The values ``configure_runtime(device=...)`` takes; ``"auto"`` resolves to ``"cuda"`` where
#: every backend's framework has a CUDA device, else to ``"cpu"``.
DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")

_current = "cpu"


class DeviceError(ValueError):
    """A device that this machine or these library builds cannot provide."""


def check_device(device: object) -> str:
    """``device`` if it is one of :data:`DEVICES`; ``ValueError`` naming them otherwise."""
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; one of: {', '.join(DEVICES)}")
    return str(device)


def current() -> str:
    """The device of this process's fits: ``"cpu"`` unless :func:`configure_runtime` chose
    ``"cuda"``."""
    return _current


def set_current(device: str) -> None:
    """Record the resolved device (``"cpu"`` or ``"cuda"``); :func:`configure_runtime` only."""
    global _current
    if device not in ("cpu", "cuda"):
        raise ValueError(f"a resolved device is 'cpu' or 'cuda', got {device!r}")
    _current = device


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def host_threads() -> int:
    """Threads a computation on the host may spread over: this process's cores, at most the
    thread budget ``$OMP_NUM_THREADS`` gives it (a benchmark worker's share of the machine)."""
    budget = os.environ.get("OMP_NUM_THREADS", "")
    cores = cpu_count()
    return max(1, min(cores, int(budget))) if budget.isdigit() else cores
