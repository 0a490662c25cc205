"""torch's process-wide settings (:func:`ppl_bnn.runtime.configure_runtime`): its intra-op
threads. Neither importing this module nor configuring it imports torch: a thread count given
before torch is imported waits until the backend's ``ops`` imports it (:func:`apply_pending`),
so that a process that never fits on Pyro (a benchmark worker of NumPyro cells) does not spend
a second and a half importing torch to set it."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

#: The thread count configured before torch was imported, applied when it is.
_pending_threads: int | None = None


def configure(settings: Mapping[str, Any]) -> None:
    """Apply ``torch_threads`` where given (not None): now where torch is imported, else once
    the backend imports it; the other settings are other frameworks'."""
    global _pending_threads
    if settings.get("torch_threads") is None:
        return
    _pending_threads = settings["torch_threads"]
    if "torch" in sys.modules:
        apply_pending()


def apply_pending() -> None:
    """Set the thread count :func:`configure` was given, if it was not yet set (called by the
    backend's ``ops`` once it has imported torch)."""
    global _pending_threads
    if _pending_threads is not None:
        import torch

        torch.set_num_threads(_pending_threads)
        _pending_threads = None
