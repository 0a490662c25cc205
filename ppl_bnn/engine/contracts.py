"""What every backend provides, and the :class:`Target` a fit hands to a method's runner."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol

import numpy as np

from ppl_bnn.engine.registry import get_backend

if TYPE_CHECKING:  # types only: the model sits above this layer
    from ppl_bnn.model.bnn import BNN
    from ppl_bnn.model.dropout import Dropout
    from ppl_bnn.model.program import PPL
    from ppl_bnn.model.spec import BNNSpec


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The attributes, properties and methods a Protocol class declares, its bases' included
    (what a class or module must have to satisfy it), sorted."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object, Protocol, Generic):
            continue
        names |= set(getattr(cls, "__annotations__", {}))
        names |= {
            n for n, v in vars(cls).items() if inspect.isfunction(v) or isinstance(v, property)
        }
    return tuple(sorted(n for n in names if not n.startswith("_")))


class Backend(Protocol):
    """What every backend's ``ops`` module provides."""

    name: str
    #: The PPL the one model program is written against (:class:`~ppl_bnn.model.program.PPL`).
    ppl: PPL

    def model(self, spec: BNNSpec, dropout: Dropout | None = None) -> Any:
        """The model callable ``model(x, y=None)`` of this PPL; with ``dropout``, the network
        trained with dropout (:mod:`ppl_bnn.model.dropout`; ``mcdropout`` only)."""

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

    def fit_compilations(self) -> Compilations | None:
        """Started at the start of a fit, before anything compiles: what the fit compiles or
        reads from a compilation cache (NumPyro: JAX's persistent cache, enabled here), or None
        where the backend keeps no such count (Pyro)."""


class Compilations(Protocol):
    """A fit's compilation count, from :meth:`Backend.fit_compilations`."""

    def finish(self) -> dict[str, Any]:
        """What was compiled and read from the cache since the start, kept as the fit's
        ``info["jax_cache"]``."""


class Linearised(Protocol):
    """What every backend's ``linearised`` module provides (read by
    ``ppl_bnn.engine.registry.get_module(backend, "linearised")``): the network linearised around a
    mode, for the GLM predictive of :mod:`ppl_bnn.predictive`."""

    def forward_linearised(
        self,
        spec: BNNSpec,
        mode: Mapping[str, np.ndarray],
        params: Mapping[str, np.ndarray],
        x: np.ndarray,
    ) -> np.ndarray:
        """``f(x, mode) + J(x, mode) (theta_s - mode)`` for every draw ``theta_s`` of ``params``
        (S, ...) -> f (S, N, output_dim), like :meth:`Backend.forward_draws` computed
        :func:`draws_per_batch` draws at a time, by one Jacobian-vector product per draw (no
        Jacobian is formed). ``mode`` holds every weight site (one draw's shape); other sites
        (the noise precision) are not read."""


#: Hidden activations held by one batch of a forward pass over draws: 2**19 floats (2 MiB),
#: small enough to stay in cache between a layer's matmul and its activation.
_BATCH_FLOATS = 2**19


def draws_per_batch(spec: BNNSpec, num_points: int) -> int:
    """How many draws one step of a forward pass over draws takes at ``num_points`` inputs.

    Layer by layer over all draws at once writes every hidden activation to memory and reads it
    back; a few draws at a time keeps them in cache, which is faster once draws x points is
    large. A layer's activations per example are its output's size (``spec.widths``), H W C
    for a convolution's feature maps.
    """
    return max(1, _BATCH_FLOATS // (max(1, num_points) * max(spec.widths)))


@dataclass(frozen=True)
class Target:
    """What a runner fits, built once per fit: the model, its data as the backend's arrays and
    the backend's model program.

    Attributes:
        backend: Backend name.
        model: The model (spec and checked numpy data: prior draws, minibatch schedules).
        x, y: The training data as the backend's arrays.
        program: The model callable ``program(x, y=None, likelihood_scale=1.0)``.
        validation: Held-out ``(x, y)`` as checked numpy arrays, for methods that record
            training curves; None when not given.
        variant: What makes ``program`` other than the spec's own model (``mcdropout``'s
            training-time :class:`~ppl_bnn.model.dropout.Dropout`); None for the spec's model.
            Compiled programs that call ``program`` are kept under it, so that a fit of one
            program never runs one compiled for another; those that take the model's numbers
            as arguments add its ``numbers()`` to the spec's and keep them under its
            ``numberless()``.
    """

    backend: str
    model: BNN
    x: Any
    y: Any
    program: Callable[..., Any]
    validation: tuple[np.ndarray, np.ndarray] | None = None
    variant: Any = None

    @classmethod
    def build(
        cls, backend: str, model: BNN, validation: tuple[np.ndarray, np.ndarray] | None = None
    ) -> Target:
        ops = get_backend(backend)
        x, y = ops.data(model.spec, model.x, model.y)
        program = ops.model(model.spec)
        return cls(backend=backend, model=model, x=x, y=y, program=program, validation=validation)

    @property
    def spec(self) -> BNNSpec:
        return self.model.spec

    @property
    def num_data(self) -> int:
        return self.model.num_data
