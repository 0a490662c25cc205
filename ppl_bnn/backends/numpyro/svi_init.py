"""NumPyro's SVI initialisation as one compiled program, and autoguides set up inside the
programs that use them.

``SVI.init`` runs eagerly: it traces the model and the guide and checks the start's log density
and gradient op by op, and JAX compiles each operation for its shapes, over a hundred small XLA
programs for a small network, which take longer than the optimisation itself on a new model
shape. Here the same initialisation runs as one compiled program, kept for later fits like the
others (:func:`~ppl_bnn.backends.numpyro.programs.compiled`).

An autoguide keeps what it learnt from the model the first time it is called (its prototype),
and what is set up inside a compiled program belongs to that program's trace. So the guide is
set up afresh inside each program that calls it and never eagerly: its prototype is cleared
before and after each such program is traced (:func:`traced`), and a program that draws from
the guide calls it first (:func:`set_up`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from numpyro import handlers
from numpyro.infer import SVI

from ppl_bnn.backends.numpyro.programs import compiled


def initialise(
    svi: SVI, key: jax.Array, data: tuple, start: dict[str, Any], program_key: tuple
) -> Any:
    """``svi.init(key, x, y, **kwargs)`` for ``data = (x, y, kwargs)`` (the model's keyword
    arguments: its likelihood scale and numbers, arrays), computed by one
    compiled program kept under ``program_key``: what the initialisation closes over, the model
    and the guide with its options (Adam's initial state does not depend on its step size).

    ``start`` is the dict of constrained site values that ``svi.guide`` starts from
    (``init_loc_fn=init_to_value(values=start)``). It is an argument of the program: while the
    program is traced, ``start`` holds that argument, so that a later fit that reuses the
    program starts from its own values, not from those of the fit that compiled it.

    NumPyro's own test of the start (a finite log density and gradient) does not stop a traced
    initialisation: a start where the loss is not finite shows as a non-finite loss at the
    first step instead, as on Pyro. The initialisation is also traced without running
    (``jax.eval_shape``): that is where ``svi`` learns its parameters' constraints
    (``svi.get_params``), also when an earlier fit compiled the program."""
    concrete = dict(start)

    def init(key: jax.Array, data: tuple, values: dict[str, Any]) -> Any:
        start.update(values)
        try:
            return svi.init(key, data[0], data[1], **data[2])
        finally:
            start.update(concrete)

    jax.eval_shape(traced(svi.guide, init), key, data, concrete)
    program = compiled((*program_key, "init"), traced(svi.guide, init), key, data, concrete)
    return program(key, data, concrete)


def traced(guide: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, with ``guide``'s prototype cleared before and after each call: a program that
    traces ``fn`` sets the guide up from its own values, and leaves nothing of its trace in the
    guide."""

    @functools.wraps(fn)
    def wrapped(*args: Any) -> Any:
        guide.prototype_trace = None
        try:
            return fn(*args)
        finally:
            guide.prototype_trace = None

    return wrapped


def set_up(guide: Any, *args: Any, **kwargs: Any) -> None:
    """Call ``guide`` once, hidden from any handler, so that it sets up its prototype from
    ``args`` (methods such as ``sample_posterior`` expect it set up)."""
    handlers.block(handlers.seed(guide, rng_seed=0))(*args, **kwargs)
