"""JAX's side of the device (:mod:`ppl_bnn.devices`): JAX's default device, where every array a
NumPyro fit creates is placed and every program runs."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import jax

#: The logger through which JAX reports, at INFO, each platform it failed to start while it
#: looks for one (``Unable to initialize backend 'tpu'`` with the loader's error).
_BACKEND_LOGGER = "jax._src.xla_bridge"


@contextlib.contextmanager
def _quiet_backend_search() -> Iterator[None]:
    """JAX's search for its platforms without its log lines: the answer is what counts, and
    a CLI at INFO would otherwise print a loader error before its own clear message."""
    search = logging.getLogger(_BACKEND_LOGGER)
    level = search.level
    search.setLevel(logging.WARNING)
    try:
        yield
    finally:
        search.setLevel(level)


def cuda_missing() -> str | None:
    """Why JAX cannot run on a CUDA device here, or None when it can."""
    try:
        with _quiet_backend_search():
            jax.devices("gpu")
    except RuntimeError:
        return f"jax {jax.__version__} has no GPU backend (a jaxlib without CUDA plugins)"
    return None


def use(device: str) -> None:
    """Make ``device``'s first JAX device (``"cpu"`` or ``"cuda"``: JAX's ``gpu``) the
    default."""
    jax.config.update("jax_default_device", jax.devices("gpu" if device == "cuda" else "cpu")[0])
