"""An optimisation's steps under one compiled ``lax.scan``, or, with a training curve
(:mod:`ppl_bnn.methods.curves`), in equal compiled scans of ``every`` steps with a checkpoint
between them: the chunk is compiled once and run once per checkpoint, the last one padded with
steps that change nothing.

A network with convolutions on the CPU takes its steps one compiled call each instead
(:func:`steps_in_loop`): XLA:CPU runs a convolution and its gradients about ten times slower
inside a compiled loop's body than in a program of its own, while a call costs little beside a
convolutional network's step."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ppl_bnn import devices
from ppl_bnn.backends.numpyro.programs import compiled
from ppl_bnn.methods.curves import TrainingCurve
from ppl_bnn.model.layers import Conv2d
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.timing import now

#: ``((state, stopped), inputs, active, data) -> ((state, stopped), outputs)``: one step, where
#: ``active`` is None (every step is taken) or a traced bool (False on a padding step) and
#: ``data`` the training data, an argument of the program rather than a constant in it.
Step = Callable[[tuple[Any, Any], Any, Any, Any], tuple[tuple[Any, Any], Any]]


def hold(new: Any, old: Any, stopped: Any, loss: Any, active: Any) -> tuple[Any, Any]:
    """``(state, stopped)`` after a step: after a non-finite loss, or on a padding step, the state
    stays where it was, as Pyro's loop stops there, so that ``check_losses`` names the sites
    that broke down on both backends."""
    keep = stopped if active is None else stopped | ~active
    new = jax.tree.map(lambda a, b: jnp.where(keep, b, a), new, old)
    broke = ~jnp.isfinite(loss)
    return new, stopped | (broke if active is None else broke & active)


def steps_in_loop(spec: BNNSpec) -> bool:
    """Whether ``spec``'s optimisation takes its steps one compiled call each (a network with
    convolutions, on the CPU) rather than in one compiled loop."""
    return devices.current() == "cpu" and any(isinstance(layer, Conv2d) for layer in spec.layers)


def run_steps(
    step: Step,
    state: Any,
    xs: Any,
    num_steps: int,
    curve: TrainingCurve | None,
    record: Callable[[Any], None],
    key: tuple,
    data: Any,
    *,
    loop: bool = False,
) -> tuple[Any, Any, float, float]:
    """``(state, outputs, compile seconds, run seconds)`` of ``num_steps`` steps over the per-step
    inputs ``xs`` (leading axis ``num_steps``, or None); ``outputs`` stacked per step. With a
    ``curve``, ``record(state)`` records each checkpoint in it, and the run's seconds leave out
    the checkpoints'. ``key``: what ``step`` closes over, under which the
    compiled scan is kept for later fits (:func:`~ppl_bnn.backends.numpyro.programs.compiled`);
    ``data``, passed to every step, is an argument: fits on other data of the same shapes (the
    validation splits of other seeds) run the same program. ``loop``: one compiled call per
    step (:func:`steps_in_loop`), with the same checkpoints."""
    carry = (state, jnp.array(False))
    start = now()
    if loop:
        return _step_by_step(step, carry, xs, num_steps, curve, record, key, data)
    if curve is None:

        def optimise(carry, xs, data):
            return lax.scan(lambda c, x: step(c, x, None, data), carry, xs, length=num_steps)

        program = compiled((*key, "steps", num_steps), optimise, carry, xs, data)
        compiled_at = now()
        (state, _), outputs = jax.block_until_ready(program(carry, xs, data))
        return state, outputs, compiled_at - start, now() - compiled_at
    every = curve.every
    chunks = math.ceil(num_steps / every)
    active = (jnp.arange(chunks * every) < num_steps).reshape(chunks, every)

    def split(a: jax.Array) -> jax.Array:
        pad = jnp.repeat(a[-1:], chunks * every - num_steps, axis=0)
        return jnp.concatenate([a, pad]).reshape(chunks, every, *a.shape[1:])

    parts = jax.tree.map(split, xs)

    def chunk(carry, xs, active, data):
        return lax.scan(lambda c, x: step(c, x[0], x[1], data), carry, (xs, active))

    part = jax.tree.map(lambda a: a[0], parts)
    program = compiled((*key, "chunk", every), chunk, carry, part, active[0], data)
    compiled_at = now()
    outputs = []
    for c in range(chunks):
        part = jax.tree.map(lambda a, c=c: a[c], parts)
        carry, out = jax.block_until_ready(program(carry, part, active[c], data))
        record(carry[0])
        outputs.append(out)
    outputs = jax.tree.map(lambda *a: jnp.concatenate(a)[:num_steps], *outputs)
    run = now() - compiled_at - curve.seconds
    return carry[0], outputs, compiled_at - start, run


def _step_by_step(
    step: Step,
    carry: tuple[Any, Any],
    xs: Any,
    num_steps: int,
    curve: TrainingCurve | None,
    record: Callable[[Any], None],
    key: tuple,
    data: Any,
) -> tuple[Any, Any, float, float]:
    """:func:`run_steps` with each step its own compiled call; with a curve, a checkpoint after
    every ``curve.every`` steps and after the last, as the chunked scans record them."""
    start = now()
    first = jax.tree.map(lambda a: a[0], xs)
    program = compiled((*key, "step"), lambda c, x, d: step(c, x, None, d), carry, first, data)
    compiled_at = now()
    outputs = []
    for i in range(num_steps):
        carry, out = program(carry, jax.tree.map(lambda a, i=i: a[i], xs), data)
        outputs.append(out)
        if curve is not None and ((i + 1) % curve.every == 0 or i + 1 == num_steps):
            record(jax.block_until_ready(carry)[0])
    outputs = jax.block_until_ready(jax.tree.map(lambda *a: jnp.stack(a), *outputs))
    run = now() - compiled_at - (curve.seconds if curve is not None else 0.0)
    return carry[0], outputs, compiled_at - start, run
