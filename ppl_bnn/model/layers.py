r"""Network layers as small objects: what parameters each has and how it maps its input.

A layer turns an input batch ``h`` into an output batch and may own parameters. Parameters carry
leading draw axes, so one forward pass serves one draw or many. The spec names a layer's
parameters ``w{l}``, ``b{l}``, ... with ``l`` the index among layers that have parameters, so
parameter-free layers (pooling, flattening, dropout) never shift the names.

- :class:`Dense`: :math:`h \mapsto \phi(h W + b)`, ``W`` (in, out), ``b`` (out,).

Convolution (``Conv2d``), pooling (``MaxPool2d``, ``AvgPool2d``), ``Flatten`` and ``Dropout``
belong here, one class each satisfying :class:`Layer`; the array operations a layer needs beyond
``@`` and broadcasting come from the backend's ops (:class:`~ppl_bnn.model.program.PPL`).

This module imports neither torch nor jax.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ppl_bnn.model.scalars import is_int

ACTIVATIONS: tuple[str, ...] = ("relu", "tanh", "gelu", "sigmoid")


def check_activation(activation: object) -> None:
    """``ValueError`` listing the allowed names unless ``activation`` is one of them."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; allowed: {', '.join(ACTIVATIONS)}")


@runtime_checkable
class Layer(Protocol):
    """What the spec and the model program need of a layer."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of one example's output for one example's ``input_shape``."""

    def param_shapes(self, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        """Parameter kind (``"w"``, ``"b"``) -> shape; empty for parameter-free layers."""

    def param_dims(self, index: int) -> dict[str, list[str]]:
        """Parameter kind -> ArviZ dimension names, for parametrised layer ``index``."""

    def forward(self, params: Mapping[str, Any], h: Any, ops: Any) -> Any:
        """The output for input batch ``h`` (..., N, *input_shape) and parameters by kind."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :func:`layer_from_dict` reads it back."""


@dataclass(frozen=True)
class Dense:
    """Fully connected layer with ``units`` outputs and an optional activation."""

    units: int
    activation: str | None = None

    def __post_init__(self) -> None:
        if not is_int(self.units) or self.units < 1:
            raise ValueError(f"Dense units must be a positive integer, got {self.units!r}")
        object.__setattr__(self, "units", int(self.units))
        if self.activation is not None:
            check_activation(self.activation)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (self.units,)

    def param_shapes(self, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        if len(input_shape) != 1:
            raise ValueError(
                f"Dense takes flat inputs, got examples of shape {input_shape}; flatten first"
            )
        return {"w": (input_shape[0], self.units), "b": (self.units,)}

    def param_dims(self, index: int) -> dict[str, list[str]]:
        return {"w": [f"layer{index}_in", f"layer{index}_out"], "b": [f"layer{index}_out"]}

    def forward(self, params: Mapping[str, Any], h: Any, ops: Any) -> Any:
        h = h @ params["w"] + params["b"][..., None, :]
        if self.activation is not None:
            h = ops.activations[self.activation](h)
        return h

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "dense", "units": self.units, "activation": self.activation}


#: Layer classes by the ``kind`` their :meth:`to_dict` writes.
LAYERS: dict[str, type] = {"dense": Dense}


def layer_from_dict(data: Mapping[str, Any]) -> Layer:
    """The layer a ``to_dict`` wrote; an unknown kind raises ``ValueError`` listing the known."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind not in LAYERS:
        raise ValueError(f"unknown layer kind {kind!r}; known: {', '.join(LAYERS)}")
    return LAYERS[kind](**fields)
