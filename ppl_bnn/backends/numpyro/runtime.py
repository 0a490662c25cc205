"""JAX's process-wide settings (:func:`ppl_bnn.runtime.configure_runtime`): its CPU device
count, for parallel chains, how hard XLA optimises on the CPU, and the persistent compilation
cache (:mod:`ppl_bnn.backends.numpyro.compile_cache`). Importing this module imports no JAX."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from ppl_bnn.backends.numpyro.compile_cache import set_jax_cache
from ppl_bnn.engine.xla import XLA_OPTIMISATION_FLAG_NAMES, XLA_OPTIMISATION_FLAGS


def configure(settings: Mapping[str, Any]) -> None:
    """Apply ``host_devices`` (before JAX is first used), ``xla_optimisation`` (before JAX
    starts its backend) and ``jax_cache`` where given (not None); the other settings are other
    frameworks'."""
    if settings.get("host_devices") is not None:
        import numpyro

        numpyro.set_host_device_count(settings["host_devices"])
    if settings.get("xla_optimisation") is not None:
        set_xla_optimisation(settings["xla_optimisation"])
    if settings.get("jax_cache") is not None:
        set_jax_cache(settings["jax_cache"])


def set_xla_optimisation(level: str) -> None:
    """Put ``level``'s flags (:data:`~ppl_bnn.engine.xla.XLA_OPTIMISATION_FLAGS`) into
    ``$XLA_FLAGS`` in place of any values the variable gave the same flags. XLA reads the
    variable once, when JAX starts its backend: later, a ``RuntimeError`` says so rather than
    leave the setting unapplied."""
    if "jax" in sys.modules:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            raise RuntimeError(
                f"xla_optimisation={level!r} must be set before JAX first runs a program: XLA "
                "read its flags when it started. Call configure_runtime(xla_optimisation=...) "
                "first in the process, or set $XLA_FLAGS before starting it"
            )
    kept = [
        flag
        for flag in os.environ.get("XLA_FLAGS", "").split()
        if not flag.startswith(XLA_OPTIMISATION_FLAG_NAMES)
    ]
    os.environ["XLA_FLAGS"] = " ".join([*kept, *XLA_OPTIMISATION_FLAGS[level]])
