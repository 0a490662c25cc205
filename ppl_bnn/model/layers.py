r"""Network layers as small objects: what parameters each has and how it maps its input.

A layer turns an input batch ``h`` into an output batch and may own parameters. Parameters carry
leading draw axes, so one forward pass serves one draw or many. The spec names a layer's
parameters ``w{l}``, ``b{l}``, ... with ``l`` the index among layers that have parameters, so
parameter-free layers (pooling, flattening) never shift the names.

- :class:`Dense`: :math:`h \mapsto \phi(h W + b)`, ``W`` (in, out), ``b`` (out,).
- :class:`Conv2d`: :math:`h \mapsto \phi(h \star W + b)` on images (H, W, C), channels last,
  ``W`` (kh, kw, in, out) (HWIO), ``b`` (out,); :math:`\star` is the cross-correlation of deep
  learning libraries, :math:`(h \star W)_{ijo} = \sum_{a,b,c} h_{s_h i + a,\, s_w j + b,\, c}
  W_{abco}` over the padded input.
- :class:`MaxPool2d`, :class:`AvgPool2d`: the max or mean over non-overlapping windows.
- :class:`Flatten`: images (H, W, C) to vectors (H W C,), row-major (channels fastest).

Images are (H, W, C) on every backend; the array operations a layer needs beyond ``@`` and
broadcasting (``conv2d``, ``pool``) come from the backend's :class:`~ppl_bnn.model.program.PPL`,
passed to :meth:`Layer.forward` as ``ppl``; they take explicit padding amounts computed here,
so both backends pad alike. Dropout is no layer of the model: ``mcdropout`` trains with it on the
input of every dense layer (:mod:`ppl_bnn.model.dropout`) and predicts from masked weights.

This module imports neither torch nor jax.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ppl_bnn.model.scalars import is_int

ACTIVATIONS: tuple[str, ...] = ("relu", "tanh", "gelu", "sigmoid")

#: Padding modes of :class:`Conv2d`.
PADDINGS: tuple[str, ...] = ("valid", "same")

#: Per spatial axis of an image, padding (before, after): ((top, bottom), (left, right)).
Padding = tuple[tuple[int, int], tuple[int, int]]


def check_activation(activation: object) -> None:
    """``ValueError`` listing the allowed names unless ``activation`` is one of them."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; allowed: {', '.join(ACTIVATIONS)}")


def _pair(owner: str, name: str, value: object) -> tuple[int, int]:
    """``value`` (an int or a pair of ints, each >= 1) as a pair; ``ValueError`` otherwise."""
    if is_int(value):
        value = (value, value)
    elif isinstance(value, np.ndarray):
        value = tuple(value.tolist())
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        value = tuple(value)
    if not (
        isinstance(value, tuple) and len(value) == 2 and all(is_int(v) and v >= 1 for v in value)
    ):
        raise ValueError(
            f"{owner} {name} must be a positive integer or a pair of them, got {value!r}"
        )
    return int(value[0]), int(value[1])


def _image(owner: str, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """``input_shape`` as (H, W, C); ``ValueError`` unless examples are images."""
    if len(input_shape) != 3:
        raise ValueError(
            f"{owner} takes images (H, W, C), got examples of shape {tuple(input_shape)}"
        )
    return input_shape[0], input_shape[1], input_shape[2]


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    r"""Padding (before, after) of one axis under TensorFlow's / JAX's ``"SAME"`` rule.

    The output has :math:`\lceil n / s \rceil` positions; the total padding
    :math:`p = \max((\lceil n/s \rceil - 1) s + k - n, 0)` is split with the odd one after:
    :math:`(\lfloor p/2 \rfloor, \lceil p/2 \rceil)` (``tf.nn.convolution`` documentation).
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


@runtime_checkable
class Layer(Protocol):
    """What the spec and the model program need of a layer."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of one example's output for one example's ``input_shape``."""

    def param_shapes(self, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        """Parameter kind (``"w"``, ``"b"``) -> shape; empty for parameter-free layers."""

    def param_dims(self, index: int) -> dict[str, list[str]]:
        """Parameter kind -> ArviZ dimension names, for parametrised layer ``index``."""

    def forward(self, params: Mapping[str, Any], h: Any, ppl: Any) -> Any:
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

    def forward(self, params: Mapping[str, Any], h: Any, ppl: Any) -> Any:
        h = h @ params["w"] + params["b"][..., None, :]
        if self.activation is not None:
            h = ppl.activations[self.activation](h)
        return h

    @classmethod
    def examples(cls) -> tuple[tuple[Layer, tuple[int, ...]], ...]:
        return ((cls(3, "tanh"), (4,)), (cls(2), (5,)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "dense", "units": self.units, "activation": self.activation}


@dataclass(frozen=True)
class Conv2d:
    """2-D convolution (cross-correlation) of images (H, W, C) with ``out_channels`` filters.

    Args:
        out_channels: Number of filters (output channels).
        kernel_size: Filter height and width: an int or a pair.
        stride: Step between filter positions: an int or a pair.
        padding: ``"valid"`` (no padding; the filter must fit the input) or ``"same"``
            (TensorFlow's and JAX's ``"SAME"``: output ``ceil(H / stride)``; see
            :func:`same_padding`).
        activation: Optional elementwise activation (:data:`ACTIVATIONS`).

    ``kernel_size`` and ``stride`` are stored as pairs.
    """

    out_channels: int
    kernel_size: int | tuple[int, int]
    stride: int | tuple[int, int] = 1
    padding: str = "valid"
    activation: str | None = None

    def __post_init__(self) -> None:
        if not is_int(self.out_channels) or self.out_channels < 1:
            raise ValueError(
                f"Conv2d out_channels must be a positive integer, got {self.out_channels!r}"
            )
        object.__setattr__(self, "out_channels", int(self.out_channels))
        object.__setattr__(self, "kernel_size", _pair("Conv2d", "kernel_size", self.kernel_size))
        object.__setattr__(self, "stride", _pair("Conv2d", "stride", self.stride))
        if self.padding not in PADDINGS:
            raise ValueError(
                f"unknown Conv2d padding {self.padding!r}; allowed: {', '.join(PADDINGS)}"
            )
        if self.activation is not None:
            check_activation(self.activation)

    def padding_amounts(self, input_shape: tuple[int, ...]) -> Padding:
        """((top, bottom), (left, right)) for examples of ``input_shape`` (H, W, C)."""
        height, width, _ = _image("Conv2d", input_shape)
        if self.padding == "same":
            return tuple(
                same_padding(n, k, s)
                for n, k, s in zip((height, width), self.kernel_size, self.stride, strict=True)
            )  # type: ignore[return-value]
        if height < self.kernel_size[0] or width < self.kernel_size[1]:
            raise ValueError(
                f"Conv2d kernel {self.kernel_size} is larger than its 'valid' input "
                f"{(height, width)}; use padding='same' or a smaller kernel"
            )
        return (0, 0), (0, 0)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        pads = self.padding_amounts(input_shape)
        spatial = (
            (n + before + after - k) // s + 1
            for n, (before, after), k, s in zip(
                input_shape[:2], pads, self.kernel_size, self.stride, strict=True
            )
        )
        return (*spatial, self.out_channels)

    def param_shapes(self, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        _, _, channels = _image("Conv2d", input_shape)
        return {"w": (*self.kernel_size, channels, self.out_channels), "b": (self.out_channels,)}

    def param_dims(self, index: int) -> dict[str, list[str]]:
        prefix = f"layer{index}"
        return {
            "w": [f"{prefix}_kh", f"{prefix}_kw", f"{prefix}_in", f"{prefix}_out"],
            "b": [f"{prefix}_out"],
        }

    def forward(self, params: Mapping[str, Any], h: Any, ppl: Any) -> Any:
        pads = self.padding_amounts(tuple(int(n) for n in h.shape[-3:]))
        h = ppl.conv2d(h, params["w"], self.stride, pads) + params["b"][..., None, None, None, :]
        if self.activation is not None:
            h = ppl.activations[self.activation](h)
        return h

    @classmethod
    def examples(cls) -> tuple[tuple[Layer, tuple[int, ...]], ...]:
        return (
            (cls(3, kernel_size=3, padding="same", activation="relu"), (6, 5, 2)),
            (cls(2, kernel_size=(2, 3), stride=2), (7, 6, 1)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "conv2d",
            "out_channels": self.out_channels,
            "kernel_size": list(self.kernel_size),
            "stride": list(self.stride),
            "padding": self.padding,
            "activation": self.activation,
        }


@dataclass(frozen=True)
class _Pool2d:
    """Reduction over non-overlapping ``size`` windows of images (stride = size, no padding):
    trailing rows and columns that do not fill a window are dropped, as in Keras and torch."""

    size: int | tuple[int, int]

    KIND: ClassVar[str]
    REDUCE: ClassVar[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", _pair(type(self).__name__, "size", self.size))

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        height, width, channels = _image(type(self).__name__, input_shape)
        if height < self.size[0] or width < self.size[1]:
            raise ValueError(
                f"{type(self).__name__} window {self.size} is larger than its input "
                f"{(height, width)}"
            )
        return height // self.size[0], width // self.size[1], channels

    def param_shapes(self, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        self.output_shape(input_shape)
        return {}

    def param_dims(self, index: int) -> dict[str, list[str]]:
        return {}

    def forward(self, params: Mapping[str, Any], h: Any, ppl: Any) -> Any:
        return ppl.pool(h, self.REDUCE, self.size)

    @classmethod
    def examples(cls) -> tuple[tuple[Layer, tuple[int, ...]], ...]:
        return ((cls(2), (6, 5, 2)), (cls((3, 2)), (7, 4, 1)))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, "size": list(self.size)}


@dataclass(frozen=True)
class MaxPool2d(_Pool2d):
    """Max over non-overlapping ``size`` windows (an int or a pair); see :class:`_Pool2d`."""

    KIND: ClassVar[str] = "max_pool2d"
    REDUCE: ClassVar[str] = "max"


@dataclass(frozen=True)
class AvgPool2d(_Pool2d):
    """Mean over non-overlapping ``size`` windows (an int or a pair); see :class:`_Pool2d`."""

    KIND: ClassVar[str] = "avg_pool2d"
    REDUCE: ClassVar[str] = "avg"


@dataclass(frozen=True)
class Flatten:
    """Images (H, W, C) to vectors of H W C values, row-major (channel fastest, as NumPy's
    ``reshape`` of channels-last images)."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (prod(_image("Flatten", input_shape)),)

    def param_shapes(self, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
        self.output_shape(input_shape)
        return {}

    def param_dims(self, index: int) -> dict[str, list[str]]:
        return {}

    def forward(self, params: Mapping[str, Any], h: Any, ppl: Any) -> Any:
        return h.reshape((*h.shape[:-3], -1))

    @classmethod
    def examples(cls) -> tuple[tuple[Layer, tuple[int, ...]], ...]:
        return ((cls(), (3, 2, 2)),)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "flatten"}


#: Layer classes by the ``kind`` their :meth:`to_dict` writes. Each also gives ``examples()``:
#: instances, each with the shape of one example it takes; the layer conformance tests run every
#: class here with them (a layer of one's own needs only :class:`Layer`).
LAYERS: dict[str, type] = {
    "dense": Dense,
    "conv2d": Conv2d,
    "max_pool2d": MaxPool2d,
    "avg_pool2d": AvgPool2d,
    "flatten": Flatten,
}


def layer_from_dict(data: Mapping[str, Any]) -> Layer:
    """The layer a ``to_dict`` wrote; an unknown kind raises ``ValueError`` listing the known."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind not in LAYERS:
        raise ValueError(f"unknown layer kind {kind!r}; known: {', '.join(LAYERS)}")
    return LAYERS[kind](**fields)
