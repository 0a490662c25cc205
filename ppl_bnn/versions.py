"""Versions of the libraries a fit depends on, recorded in every result."""

from __future__ import annotations

import platform
from functools import cache
from importlib import metadata

_PACKAGES = (
    "ppl_bnn", "numpy", "jax", "jaxlib", "numpyro", "blackjax", "torch", "pyro-ppl", "arviz",
)  # fmt: skip


@cache
def library_versions() -> dict[str, str]:
    """``{package: version}`` for the stack, plus ``python``."""
    out = {"python": platform.python_version()}
    for pkg in _PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out
