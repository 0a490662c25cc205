"""Versions of the libraries a fit depends on, recorded in every result."""

from __future__ import annotations

import platform
from functools import cache
from importlib import metadata

from ppl_bnn.engine.registry import backend_names, declaration


@cache
def library_versions() -> dict[str, str]:
    """``{package: version}`` for the stack (``ppl_bnn``, numpy, every backend's declared
    packages, ArviZ), plus ``python``."""
    out = {"python": platform.python_version()}
    backends = [p for name in backend_names() for p in declaration(name).packages]
    for pkg in ("ppl_bnn", "numpy", *backends, "arviz"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out
