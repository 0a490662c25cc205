"""The backend registry: which backends exist, what each declares, and its modules, found by name
and imported only when used (so using one backend never imports the other's framework).

A backend is a package (``ppl_bnn/backends/<name>/`` for the built-in ones) whose ``__init__``
exports ``BACKEND``, a :class:`BackendDeclaration` that lists what it has:

- ``ops``: the one model program compiled with the library, data conversion, log density and
  forward passes over draws (:class:`~ppl_bnn.engine.contracts.Backend`);
- its *drivers*: one module per driver that methods name (``autoguide``, ``hmc``, ``sgmcmc``,
  ...), each with ``run(name, target, options, seed)``;
- its further *modules* of array operations that some methods or the runtime read
  (``linearised``, ``jacobian``, ``device``; :data:`~ppl_bnn.engine.contracts.MODULE_CONTRACTS`).

A package outside ``ppl_bnn`` joins with :func:`register_backend`. Importing a backend's package
imports its declaration only, never its framework; this module imports no backend until a name
is asked for. :func:`ppl_bnn.engine.conformance.check_conformance` checks a backend against its
declaration and the contracts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

#: The packages of the built-in backends, in the order listings and reports use.
BUILT_IN: tuple[str, ...] = ("ppl_bnn.backends.numpyro", "ppl_bnn.backends.pyro")
#: The backend ``fit``, ``compare`` and the command line use unless told otherwise.
DEFAULT_BACKEND = "numpyro"


@dataclass(frozen=True)
class OwnOption:
    """An option of the methods' options that this backend alone reads (a field declared with
    :func:`ppl_bnn.methods.base.backend_option`), e.g. Pyro's ``potential``.

    Attributes:
        name: The options field.
        values: The values it takes on this backend (empty: any that the field's own check
            allows).
    """

    name: str
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class BackendDeclaration:
    """What one backend package provides, exported from its ``__init__`` as ``BACKEND``.

    Attributes:
        name: What ``fit(..., backend=name)`` takes.
        framework: The array library its programs run on, for messages (``"JAX"``).
        title: How reports write its name (``"NumPyro"``; default: ``name``).
        drivers: Its driver modules, each with ``run(name, target, options, seed)``; a method
            whose driver (or whose run function's ``Method.requires``) is not listed does not
            run on it, and is refused by name.
        modules: Its further modules (``"linearised"``, ``"jacobian"``, ``"device"``,
            ``"runtime"``, ``"perf"``), read by
            :func:`get_module`; ``ops`` is always there and not listed.
        parallel_chains: A sampler's chains run in parallel, one per host device of the worker
            (a benchmark gives such a cell as many devices as chains).
        xla: XLA compiles its programs, so a suite's ``xla_optimisation`` applies to its cells
            (:data:`ppl_bnn.engine.xla.XLA_OPTIMISATION`).
        packages: The distributions (as pip names them) it runs on, whose versions every
            result records (:func:`ppl_bnn.versions.library_versions`).
        own_options: The options it alone reads; ``fit`` refuses them on any other backend.
        check_options: Called with a method's options dataclass before a fit on this backend;
            raises ``ValueError`` naming a combination it cannot run (None: every one runs).
    """

    name: str
    framework: str
    drivers: tuple[str, ...]
    title: str = ""
    modules: tuple[str, ...] = ()
    parallel_chains: bool = False
    xla: bool = False
    packages: tuple[str, ...] = ()
    own_options: tuple[OwnOption, ...] = ()
    check_options: Callable[[Any], None] | None = None

    @property
    def display_name(self) -> str:
        """:attr:`title`, or the name where it has none."""
        return self.title or self.name


_packages: dict[str, str] = {}
_declarations: dict[str, BackendDeclaration] = {}


def _declare(package: str) -> BackendDeclaration:
    """Read ``package``'s ``BACKEND`` and enter it; ``ValueError`` naming what is wrong."""
    declared = getattr(importlib.import_module(package), "BACKEND", None)
    if not isinstance(declared, BackendDeclaration):
        raise ValueError(
            f"backend package {package!r} exports no BACKEND = BackendDeclaration(...) "
            f"(ppl_bnn.engine.registry); got {type(declared).__name__}"
        )
    other = _packages.get(declared.name)
    if other is not None and other != package:
        raise ValueError(f"backend {declared.name!r} of {package!r} is already {other!r}'s name")
    _packages[declared.name] = package
    _declarations[declared.name] = declared
    return declared


def _load_built_in() -> None:
    if not _declarations:
        for package in BUILT_IN:
            _declare(package)


def register_backend(package: str) -> str:
    """Add the backend whose package (importable by that name) exports ``BACKEND``; its name.

    Registering the same package again is harmless. The processes a benchmark starts register
    the built-in backends only: a suite runs those.

    Raises:
        ValueError: If the package declares no :class:`BackendDeclaration`, or its name is
            another package's.
    """
    _load_built_in()
    return _declare(package).name


def backend_names() -> tuple[str, ...]:
    """Every registered backend's name: the built-in ones first."""
    _load_built_in()
    return tuple(_declarations)


def check_backend(name: object) -> str:
    """``name`` if it is a backend; ``ValueError`` listing the known ones otherwise."""
    names = backend_names()
    if name not in names:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(names)}")
    return str(name)


def declaration(name: str) -> BackendDeclaration:
    """What backend ``name`` declares."""
    return _declarations[check_backend(name)]


def option_owners() -> dict[str, str]:
    """``{option: backend}`` for every option that one backend alone reads."""
    return {own.name: name for name in backend_names() for own in declaration(name).own_options}


def _module(backend: str, name: str) -> ModuleType:
    return importlib.import_module(f"{_packages[check_backend(backend)]}.{name}")


def get_backend(name: str) -> ModuleType:
    """The ``ops`` module of backend ``name`` (see :class:`~ppl_bnn.engine.contracts.Backend`)."""
    return _module(name, "ops")


def get_module(backend: str, name: str) -> ModuleType:
    """Module ``name`` of backend ``backend`` (e.g. ``"linearised"``), imported on first use;
    ``ValueError`` where the backend does not declare it."""
    declared = declaration(backend)
    if name not in declared.modules:
        raise ValueError(
            f"backend {backend!r} has no module {name!r}; it declares: "
            f"{', '.join(declared.modules) or 'none'}"
        )
    return _module(backend, name)


def has_driver(backend: str, driver: str) -> bool:
    """Whether backend ``backend`` declares the driver ``driver`` (nothing imported)."""
    return driver in declaration(backend).drivers


def get_driver(backend: str, driver: str) -> Callable[..., Any]:
    """``run(name, target, options, seed)`` of driver ``driver`` on ``backend``; ``ValueError``
    where the backend does not declare it."""
    declared = declaration(backend)
    if driver not in declared.drivers:
        raise ValueError(
            f"backend {backend!r} has no driver {driver!r}; its drivers: "
            f"{', '.join(declared.drivers) or 'none'}"
        )
    return _module(backend, driver).run
