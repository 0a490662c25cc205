"""Compiled programs kept for the life of the process, keyed by what determines them.

``jax.jit`` caches a compiled program per Python function object, and a fit builds its functions
anew (they close over its model, options and data), so a second fit of the same model traces,
lowers and compiles, or loads from JAX's persistent cache, every program again: seconds per fit,
far more than running them on a small network. :func:`compiled` keeps each program under a key
that its caller builds from everything the program closes over (the spec, the data, the
options, the static sizes), so the next fit with the same key, another seed of the same cell in
a warm benchmark worker, runs the program compiled for the first. Seeds, initial values and
random keys are arguments of the programs, never part of them; so are the model's numbers where a
driver passes them (:func:`~ppl_bnn.model.program.model_numbers`: the settings of a tuning grid
run one program), and its key then holds the spec without them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax

from ppl_bnn.keys import content_key

#: Programs kept (least recently used dropped first).
MAX_PROGRAMS = 64

_programs: OrderedDict[str, Any] = OrderedDict()


def compiled(key: tuple, fn: Callable, *example: Any) -> Callable:
    """``jax.jit(fn).lower(*example).compile()``, or the program compiled for ``key`` earlier in
    this process. ``key`` must hold everything ``fn`` closes over that changes the program
    (see the module docstring); ``example``'s shapes and dtypes join it."""
    shapes = jax.tree.map(lambda a: (jax.numpy.shape(a), str(jax.numpy.result_type(a))), example)
    full = content_key(*key, jax.tree.structure(example), shapes)
    program = _programs.get(full)
    if program is None:
        program = jax.jit(fn).lower(*example).compile()
        _programs[full] = program
        while len(_programs) > MAX_PROGRAMS:
            _programs.popitem(last=False)
    else:
        _programs.move_to_end(full)
    return program
