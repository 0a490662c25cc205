"""JAX's process-wide settings (:func:`ppl_bnn.runtime.configure_runtime`): its CPU device
count, for parallel chains, and the persistent compilation cache
(:mod:`ppl_bnn.backends.numpyro.compile_cache`). Importing this module imports no JAX."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ppl_bnn.backends.numpyro.compile_cache import set_jax_cache


def configure(settings: Mapping[str, Any]) -> None:
    """Apply ``host_devices`` (before JAX is first used) and ``jax_cache`` where given (not
    None); the other settings are other frameworks'."""
    if settings.get("host_devices") is not None:
        import numpyro

        numpyro.set_host_device_count(settings["host_devices"])
    if settings.get("jax_cache") is not None:
        set_jax_cache(settings["jax_cache"])
