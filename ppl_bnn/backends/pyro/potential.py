r"""The Pyro model's potential energy on one flat vector of unconstrained parameters.

With the sites laid end to end in :class:`~ppl_bnn.flat.FlatLayout` order and
:math:`\theta = T(z)` the library's bijections onto the priors' supports,

.. math:: U(z) = -\log p(T(z)) - c \log p(y \mid x, T(z)) - \log|\det J_T(z)|,

with :math:`\log p` computed by Pyro's own tracer of the Pyro model
(:func:`ppl_bnn.backends.pyro.ops.log_joint`) and :math:`c` the likelihood scale. One flat site
instead of one tensor per site halves the per-step cost of Pyro's HMC/NUTS kernels, which do their
arithmetic site by site.

Modes, fastest first:

- ``"compiled"``: the value and the gradient are captured together as one graph of ATen
  operations (``make_fx`` of ``torch.func.grad_and_value``) and compiled by ``torch.compile``
  (Inductor, which fuses the many small operations of the log joint into C++ kernels). Needs a
  C++ compiler at run time; if compiling fails the potential falls back to ``"traced"`` and says
  so in :attr:`FlatPotential.mode`.
- ``"traced"``: ``torch.jit.trace`` of the potential, as Pyro's own ``jit_compile`` does.
- ``"eager"``: plain torch autograd.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pyro
import torch

from ppl_bnn.backends.pyro import FLAT_POTENTIALS
from ppl_bnn.backends.pyro import ops as backend
from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.keys import content_key
from ppl_bnn.model.flat import FlatLayout
from ppl_bnn.model.program import constrain, site_transforms
from ppl_bnn.model.spec import BNNSpec

logger = logging.getLogger(__name__)

#: Compiled value-and-gradient graphs of this process, by the key of what they hold.
_COMPILED: dict[str, Callable] = {}


def jit_trace(fn: Callable, example: tuple) -> Callable:
    """``torch.jit.trace`` of a function of the Pyro model, as Pyro's ``jit_compile`` does it."""
    with warnings.catch_warnings(), pyro.validation_enabled(False):
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.trace")
        return torch.jit.trace(fn, example, check_trace=False)


def _compile_value_and_grad(fn: Callable, example: tuple) -> Callable:
    """``(z, *data) -> (grad, value)`` of ``fn`` as one compiled graph."""
    from torch.fx.experimental.proxy_tensor import make_fx

    with pyro.validation_enabled(False):
        graph = make_fx(torch.func.grad_and_value(fn))(*example)
    compiled = torch.compile(graph, fullgraph=True, dynamic=False)
    with warnings.catch_warnings(), torch.no_grad():
        # torch 2.13's Inductor still calls its own deprecated torch.jit.script_method.
        warnings.filterwarnings(
            "ignore", message=r".*torch\.jit\.script_method", category=DeprecationWarning
        )
        compiled(*example)  # Inductor compiles lazily: do it now, so failures surface here
    return compiled


class _Precomputed(torch.autograd.Function):
    """Returns a value whose gradient was computed with it, so autograd does no more work."""

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor, value: torch.Tensor, grad: torch.Tensor) -> Any:
        ctx.save_for_backward(grad)
        return value

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> Any:
        (grad,) = ctx.saved_tensors
        return grad_output * grad, None, None


def _energy(
    spec: BNNSpec, layout: FlatLayout, transforms: dict, likelihood_scale: float
) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """:math:`U(z; x, y)` computed eagerly from the Pyro model (what every mode evaluates)."""
    log_joint = backend.log_joint(spec)

    def energy(z: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        theta, log_det = constrain(transforms, layout.unflatten(z))
        return -(log_joint(theta, x, y, likelihood_scale) + log_det)

    return energy


class FlatPotential:
    """:math:`U(z)` of a Pyro BNN for a flat ``z`` (a float32 tensor of :attr:`size`).

    Calling it returns a scalar tensor differentiable with respect to ``z`` (what Pyro's
    integrators need); ``x`` and ``y`` may be passed per call (minibatches of a fixed size).
    :attr:`energy` is the same function evaluated eagerly, and :attr:`mode` the mode in use.

    Args:
        spec: The model.
        x, y: Training data as torch tensors (the example shapes for tracing and compiling).
        likelihood_scale: :math:`c`, e.g. ``N / batch_size`` for minibatches.
        mode: ``"compiled"``, ``"traced"`` or ``"eager"``.
    """

    def __init__(
        self,
        spec: BNNSpec,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        likelihood_scale: float = 1.0,
        mode: str = "compiled",
    ) -> None:
        if mode not in FLAT_POTENTIALS:
            raise ValueError(f"unknown potential mode {mode!r}; available: {FLAT_POTENTIALS}")
        self.layout = FlatLayout.of(spec)
        self.x, self.y = x, y
        self._transforms = site_transforms(spec, backend.PPL_PYRO)
        self.energy = _energy(spec, self.layout, self._transforms, likelihood_scale)
        self.mode = mode
        example = (torch.zeros(self.size), x, y)
        self._value_and_grad: Callable | None = None
        self._fn: Callable = self.energy
        if mode == "compiled":
            # The compiled graph takes z, x and y as inputs: what it holds is the spec and the
            # likelihood scale, so later fits of the same model and data shapes reuse it.
            key = content_key(
                spec, likelihood_scale, *((tuple(t.shape), str(t.dtype)) for t in example)
            )
            try:
                if key not in _COMPILED:
                    _COMPILED[key] = _compile_value_and_grad(self.energy, example)
                self._value_and_grad = _COMPILED[key]
            except Exception as err:  # no C++ compiler, an unsupported operation, ...
                logger.warning("compiling the Pyro potential failed (%s); tracing it instead", err)
                self.mode = "traced"
        if self.mode == "traced":
            self._fn = jit_trace(self.energy, example)

    @property
    def size(self) -> int:
        return self.layout.size

    def __call__(
        self, z: torch.Tensor, x: torch.Tensor | None = None, y: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = self.x if x is None else x
        y = self.y if y is None else y
        if self._value_and_grad is None:
            return self._fn(z, x, y)
        grad, value = self._value_and_grad(z.detach(), x, y)
        return _Precomputed.apply(z, value, grad)

    def constrained(self, z: np.ndarray) -> dict[str, np.ndarray]:
        """Flat unconstrained draws (..., size) as constrained site values."""
        with torch.no_grad():
            theta, _ = constrain(self._transforms, self.layout.unflatten(torch.as_tensor(z)))
        return {k: to_numpy(v) for k, v in theta.items()}
