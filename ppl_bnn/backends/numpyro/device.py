"""JAX's side of the device (:mod:`ppl_bnn.devices`): JAX's default device, where every array a
NumPyro fit creates is placed and every program runs."""

from __future__ import annotations

import jax


def cuda_missing() -> str | None:
    """Why JAX cannot run on a CUDA device here, or None when it can."""
    try:
        jax.devices("gpu")
    except RuntimeError:
        return f"jax {jax.__version__} has no GPU backend (a jaxlib without CUDA plugins)"
    return None


def use(device: str) -> None:
    """Make ``device``'s first JAX device (``"cpu"`` or ``"cuda"``: JAX's ``gpu``) the
    default."""
    jax.config.update("jax_default_device", jax.devices("gpu" if device == "cuda" else "cpu")[0])
