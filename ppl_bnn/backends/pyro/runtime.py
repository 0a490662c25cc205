"""torch's process-wide settings (:func:`ppl_bnn.runtime.configure_runtime`): its intra-op
threads. Importing this module imports no torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def configure(settings: Mapping[str, Any]) -> None:
    """Apply ``torch_threads`` where given (not None); the other settings are other
    frameworks'."""
    if settings.get("torch_threads") is not None:
        import torch

        torch.set_num_threads(settings["torch_threads"])
