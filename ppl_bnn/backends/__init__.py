"""Backends: the one BNN program compiled to a PPL, plus the array operations fits need.

Backends are imported lazily so that using one does not import the other's framework.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from ppl_bnn.spec import BNNSpec

BACKENDS: tuple[str, ...] = ("numpyro", "pyro")


class Backend(Protocol):
    """What every backend module provides."""

    name: str

    def model(self, spec: BNNSpec) -> Any:
        """The model callable ``model(x, y=None)`` of this PPL."""

    def log_joint(self, spec: BNNSpec) -> Any:
        """Differentiable ``(params, x, y, likelihood_scale) -> log joint`` in framework arrays."""

    def data(self, spec: BNNSpec, x: np.ndarray, y: np.ndarray | None) -> tuple[Any, Any]:
        """``x`` and ``y`` as this framework's arrays (float32 inputs; float32 or int labels)."""

    def log_density(
        self,
        spec: BNNSpec,
        x: Any,
        y: Any,
        params: Mapping[str, np.ndarray],
        likelihood_scale: float = 1.0,
    ) -> float:
        """Log joint ``log p(params) + c log p(y | x, params)`` by the PPL's own tracer."""

    def grad_log_density(
        self, spec: BNNSpec, x: Any, y: Any, params: Mapping[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Gradient of :meth:`log_density` with respect to every site."""

    def forward_draws(
        self, spec: BNNSpec, params: Mapping[str, np.ndarray], x: np.ndarray
    ) -> np.ndarray:
        """Network outputs for every draw: params (S, ...) -> f (S, N, output_dim), computed
        :func:`draws_per_batch` draws at a time."""


#: Hidden activations held by one batch of a forward pass over draws: 2**19 floats (2 MiB),
#: small enough to stay in cache between a layer's matmul and its activation.
_BATCH_FLOATS = 2**19


def draws_per_batch(spec: BNNSpec, num_points: int) -> int:
    """How many draws one step of a forward pass over draws takes at ``num_points`` inputs.

    Layer by layer over all draws at once writes every hidden activation to memory and reads it
    back; a few draws at a time keeps them in cache (1000 draws x 10,000 points through a
    10-50-1 tanh network: about 3x faster on a 2-core CPU).
    """
    return max(1, _BATCH_FLOATS // (max(1, num_points) * max(spec.widths)))


def get_backend(name: str) -> Backend:
    """The backend called ``name``; an unknown name raises ``ValueError`` listing the known ones."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(BACKENDS)}")
    return importlib.import_module(f"ppl_bnn.backends.{name}_backend")
