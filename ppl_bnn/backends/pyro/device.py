"""torch's side of the device (:mod:`ppl_bnn.devices`): torch's default device, so that every
tensor the Pyro model, its guides, potentials and data create lands there, and the helpers that
bring results back to numpy and draw random numbers on it."""

from __future__ import annotations

import numpy as np
import torch


def cuda_missing() -> str | None:
    """Why torch cannot run on a CUDA device here, or None when it can."""
    if torch.cuda.is_available():
        return None
    build = "a CPU build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return f"torch {torch.__version__} ({build}) sees no CUDA device"


def use(device: str) -> None:
    """Make ``device`` (``"cpu"`` or ``"cuda"``) torch's default device."""
    torch.set_default_device(device)


def generator(seed: int) -> torch.Generator:
    """A ``torch.Generator`` on torch's default device, seeded by ``seed``."""
    return torch.Generator(device=torch.get_default_device()).manual_seed(seed)


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """``tensor`` as a numpy array on the host (detached; no copy for a CPU tensor)."""
    return tensor.detach().cpu().numpy()
