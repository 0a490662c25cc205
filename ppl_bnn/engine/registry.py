"""The backend registry: which backends exist and their modules, found by name and imported only
when used (so using one backend never imports the other's framework).

A backend folder ``ppl_bnn/backends/<name>/`` has ``ops.py`` (the one model program compiled
with the library, data conversion, log density, forward passes over draws; see
:class:`~ppl_bnn.engine.contracts.Backend`), one module per driver that methods name
(``autoguide``, ``hmc``, ``sgmcmc``), each with ``run(name, target, options, seed)``, and
modules of further array ops that some methods need (``linearised``: the network linearised
around a mode, see :class:`~ppl_bnn.engine.contracts.Linearised`), read by :func:`get_module`.
This module imports none of them: it names them.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any

BACKENDS: tuple[str, ...] = ("numpyro", "pyro")


def check_backend(name: object) -> str:
    """``name`` if it is a backend; ``ValueError`` listing the known ones otherwise."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    return str(name)


def get_backend(name: str) -> ModuleType:
    """The ``ops`` module of backend ``name`` (see :class:`~ppl_bnn.engine.contracts.Backend`)."""
    return importlib.import_module(f"ppl_bnn.backends.{check_backend(name)}.ops")


def get_module(backend: str, name: str) -> ModuleType:
    """Module ``name`` of backend ``backend`` (e.g. ``"linearised"``), imported on first use."""
    return importlib.import_module(f"ppl_bnn.backends.{check_backend(backend)}.{name}")


def has_driver(backend: str, driver: str) -> bool:
    """Whether backend ``backend`` has the driver module ``driver`` (nothing heavy imported)."""
    spec = importlib.util.find_spec(f"ppl_bnn.backends.{check_backend(backend)}.{driver}")
    return spec is not None


def get_driver(backend: str, driver: str) -> Callable[..., Any]:
    """``run(name, target, options, seed)`` of driver ``driver`` on ``backend``."""
    return importlib.import_module(f"ppl_bnn.backends.{check_backend(backend)}.{driver}").run
