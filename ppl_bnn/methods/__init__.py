"""Inference methods: one module each, listed once in :data:`METHODS`.

Adding a method is one module exporting ``METHOD`` (a :class:`~ppl_bnn.methods.base.Method`) plus
one line in :data:`METHODS`; its order there is the order reports list methods in.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ppl_bnn.engine.registry import BackendDeclaration, check_backend, declaration
from ppl_bnn.methods import (
    csghmc,
    csgld,
    ensemble,
    fullrank,
    hmc,
    laplace,
    lowrank,
    mams,
    map_estimate,
    mcdropout,
    mclmc,
    multiswag,
    nuts,
    sghmc,
    sgld,
    svi,
    swag,
)
from ppl_bnn.methods.base import Family, Method, option_backends

#: Every method, in report order (exact samplers first, then SG-MCMC, VI, point estimates).
METHODS: tuple[Method, ...] = (
    nuts.METHOD,
    hmc.METHOD,
    mclmc.METHOD,
    mams.METHOD,
    sgld.METHOD,
    sghmc.METHOD,
    csgld.METHOD,
    csghmc.METHOD,
    svi.METHOD,
    lowrank.METHOD,
    fullrank.METHOD,
    laplace.METHOD,
    swag.METHOD,
    mcdropout.METHOD,
    map_estimate.METHOD,
    ensemble.METHOD,
    multiswag.METHOD,
)

_BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}


def method_names(family: Family | None = None, *, exact: bool | None = None) -> tuple[str, ...]:
    """Names of every method (of ``family``, and exact or not, when given), in table order."""
    return tuple(
        m.name
        for m in METHODS
        if (family is None or m.family == family) and (exact is None or m.exact == exact)
    )


def available() -> dict[str, tuple[str, ...]]:
    """``{method: backends}`` for every method."""
    return {m.name: m.backends for m in sorted(METHODS, key=lambda m: m.name)}


def get_method(name: str, backend: str) -> Method:
    """The method called ``name``, checked to run on ``backend``."""
    check_backend(backend)
    if name not in _BY_NAME:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(sorted(_BY_NAME))}")
    method = _BY_NAME[name]
    missing = method.missing_on(backend)
    if missing:
        why = f"; {method.unavailable}" if method.unavailable else ""
        raise ValueError(
            f"method {name!r} is not available on backend {backend!r}: it declares no "
            f"{' and no '.join(map(repr, missing))}{why}; it runs on: "
            f"{', '.join(method.backends) or 'no backend'}"
        )
    return method


def make_options(method: Method, options: dict[str, Any], backend: str | None = None) -> Any:
    """``method``'s options dataclass; unknown names raise an error listing the valid ones.

    With ``backend``, an option given that another backend alone reads (declared on its field
    with :func:`~ppl_bnn.methods.base.backend_option`) raises an error naming the option and the
    backend it applies to, and the backend's declaration checks the values of its own options
    and their combination (:class:`~ppl_bnn.engine.registry.BackendDeclaration`). Options
    stored with every field filled in are read without it.
    """
    valid = [f.name for f in fields(method.options) if f.init]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for method {method.name!r}; "
            f"valid options: {', '.join(valid)}"
        )
    made = method.options(**options)
    if backend is not None:
        for name, only in option_backends(method.options).items():
            if name in options and only != backend:
                raise ValueError(
                    f"option {name!r} of method {method.name!r} applies to the {only} backend "
                    f"only; backend {backend!r} does not read it: drop it"
                )
        _check_own_options(made, declaration(backend))
    return made


def _check_own_options(options: Any, declared: BackendDeclaration) -> None:
    """``ValueError`` naming an own option of the backend whose value it does not take, or a
    combination its ``check_options`` refuses."""
    for own in declared.own_options:
        if not own.values or not hasattr(options, own.name):
            continue
        value = getattr(options, own.name)
        if value not in own.values:
            raise ValueError(
                f"unknown {own.name} {value!r} on backend {declared.name!r}; available: "
                f"{', '.join(map(str, own.values))}"
            )
    if declared.check_options is not None:
        declared.check_options(options)


def backend_options(method: Method, backend: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without those that another backend only reads: one set of options written
    for several backends, made fit for ``backend``."""
    others = {k for k, only in option_backends(method.options).items() if only != backend}
    return {k: v for k, v in options.items() if k not in others}
