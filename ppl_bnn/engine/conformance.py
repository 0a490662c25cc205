"""Whether a backend provides what it declares and what the contracts ask: the check a new
backend's author runs (``check_conformance("mine")``) and the test suite runs on every
registered backend.

It imports the backend's modules (and so its framework) and reads their members and signatures;
it runs nothing. What the members compute is for the backend's own tests, and for the parity
tests that hold every backend to the same log density.
"""

from __future__ import annotations

import inspect
from typing import Any

from ppl_bnn.engine.contracts import Backend, Linearised, protocol_members
from ppl_bnn.engine.perf import Perf
from ppl_bnn.engine.registry import declaration, get_backend, get_driver, get_module

#: What a driver's ``run`` takes, in order.
DRIVER_PARAMETERS: tuple[str, ...] = ("name", "target", "options", "seed")

#: The members each module a backend may declare must have (a module not named here has no
#: contract beyond its users').
MODULE_CONTRACTS: dict[str, tuple[str, ...]] = {
    "linearised": protocol_members(Linearised),
    "jacobian": ("jacobian",),
    "device": ("cuda_missing", "use"),
    "runtime": ("configure",),
    "perf": protocol_members(Perf),
}


#: What the ``ops`` module provides (:class:`~ppl_bnn.engine.contracts.Backend`).
OPS_MEMBERS: tuple[str, ...] = protocol_members(Backend)


def _missing(module: Any, members: tuple[str, ...]) -> list[str]:
    return [m for m in members if not hasattr(module, m)]


def check_conformance(backend: str) -> list[str]:
    """The ways backend ``backend`` falls short of its declaration and the contracts, one line
    each; empty when it conforms.

    Checked: its ``ops`` module has every member of :class:`~ppl_bnn.engine.contracts.Backend`
    and its ``name`` is the declared one; every declared driver has ``run(name, target,
    options, seed)``; every declared module exists and has the members of its contract
    (:data:`MODULE_CONTRACTS`).
    """
    declared = declaration(backend)
    problems: list[str] = []
    try:
        ops = get_backend(backend)
    except ImportError as err:
        return [f"{backend}: its ops module does not import: {err}"]
    problems += [
        f"{backend}: ops has no {m!r} (Backend contract)" for m in _missing(ops, OPS_MEMBERS)
    ]
    if getattr(ops, "name", declared.name) != declared.name:
        problems.append(
            f"{backend}: ops.name is {ops.name!r}, the declaration says {declared.name!r}"
        )
    for driver in declared.drivers:
        try:
            run = get_driver(backend, driver)
        except (ImportError, AttributeError) as err:
            problems.append(f"{backend}: declared driver {driver!r} has no run: {err}")
            continue
        parameters = tuple(inspect.signature(run).parameters)[: len(DRIVER_PARAMETERS)]
        if parameters != DRIVER_PARAMETERS:
            problems.append(
                f"{backend}: driver {driver!r}'s run takes {parameters}, not {DRIVER_PARAMETERS}"
            )
    for name in declared.modules:
        try:
            module = get_module(backend, name)
        except ImportError as err:
            problems.append(f"{backend}: declared module {name!r} does not import: {err}")
            continue
        contract = MODULE_CONTRACTS.get(name, ())
        problems += [f"{backend}: module {name!r} has no {m!r}" for m in _missing(module, contract)]
    return problems
