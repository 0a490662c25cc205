r"""Backend-neutral description of a Bayesian MLP.

A :class:`BNNSpec` says everything needed to write the model down in any PPL:

.. math::

    h_0 = x,\qquad h_{l+1} = \phi(h_l W_l + b_l)\ (l < L),\qquad f = h_L W_L + b_L,

    W_l \sim \mathcal N(0, s_l^2),\quad b_l \sim \mathcal N(0, s_l^2),

with :math:`s_l` = ``prior_scale`` (optionally divided by :math:`\sqrt{\text{fan\_in}_l}`), and
either a Gaussian likelihood :math:`y \sim \mathcal N(f, \sigma^2)` or a categorical one
:math:`y \sim \text{Categorical}(\text{softmax}(f))`.

With ``noise="learned"`` the Gaussian noise precision :math:`\tau = \sigma^{-2}` gets the
:math:`\text{Gamma}(6, 6)` prior of probabilistic backpropagation (Hernández-Lobato & Adams 2015),
as used on the UCI regression benchmark.

This module imports neither torch nor jax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import sqrt
from typing import Literal

import numpy as np

ACTIVATIONS: tuple[str, ...] = ("relu", "tanh", "gelu", "sigmoid")
LIKELIHOODS: tuple[str, ...] = ("gaussian", "categorical")

#: Gamma(concentration, rate) prior on the noise precision when ``noise="learned"``.
LEARNED_NOISE_PRIOR: tuple[float, float] = (6.0, 6.0)

PRECISION_SITE = "precision"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


@dataclass(frozen=True, kw_only=True)
class Site:
    """One latent variable of the model.

    Attributes:
        name: Site name, identical in every backend (``w0``, ``b0``, ..., ``precision``).
        shape: Shape of one draw of the site.
        prior: ``("normal", scale)`` for weights and biases, ``("gamma", (concentration, rate))``
            for the noise precision.
    """

    name: str
    shape: tuple[int, ...]
    prior: tuple[str, float | tuple[float, float]]

    @property
    def positive(self) -> bool:
        """Whether the site lives on (0, inf) (its unconstrained transform is ``exp``)."""
        return self.prior[0] == "gamma"

    @property
    def size(self) -> int:
        out = 1
        for n in self.shape:
            out *= n
        return out


@dataclass(frozen=True, kw_only=True)
class BNNSpec:
    """A fully-connected Bayesian network: architecture, priors and likelihood.

    Args:
        input_dim: Number of input features D.
        hidden: Widths of the hidden layers; ``()`` gives Bayesian linear / softmax regression.
        activation: One of :data:`ACTIVATIONS` (``gelu`` is the exact, erf-based GELU).
        prior_scale: Prior std of every weight and bias, one number or one per layer
            (``len(hidden) + 1`` values).
        fan_in_scaling: Divide each layer's prior std by ``sqrt(fan_in)``.
        likelihood: ``"gaussian"`` or ``"categorical"``.
        noise: Gaussian likelihood only: a known noise std (> 0) or ``"learned"``.
        num_classes: Categorical likelihood only: the number of classes K (>= 2).
    """

    input_dim: int
    hidden: tuple[int, ...] = ()
    activation: str = "tanh"
    prior_scale: float | tuple[float, ...] = 1.0
    fan_in_scaling: bool = False
    likelihood: Literal["gaussian", "categorical"] = "gaussian"
    noise: float | Literal["learned"] | None = None
    num_classes: int | None = None
    _layer_scales: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _is_int(self.input_dim) or self.input_dim < 1:
            raise ValueError(f"input_dim must be a positive integer, got {self.input_dim!r}")
        object.__setattr__(self, "input_dim", int(self.input_dim))
        hidden = self.hidden
        if _is_int(hidden):
            hidden = (hidden,)
        if isinstance(hidden, np.ndarray):
            hidden = hidden.tolist()
        if not isinstance(hidden, Sequence) or isinstance(hidden, str):
            raise ValueError(f"hidden must be a sequence of layer widths, got {self.hidden!r}")
        for width in hidden:
            if not _is_int(width) or width < 1:
                raise ValueError(
                    f"hidden layer widths must be positive integers, got {self.hidden!r}"
                )
        object.__setattr__(self, "hidden", tuple(int(w) for w in hidden))
        if not isinstance(self.fan_in_scaling, bool):
            raise ValueError(f"fan_in_scaling must be True or False, got {self.fan_in_scaling!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {self.activation!r}; allowed: {', '.join(ACTIVATIONS)}"
            )
        self._validate_likelihood()
        object.__setattr__(self, "_layer_scales", self._resolve_scales())

    def _validate_likelihood(self) -> None:
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(
                f"unknown likelihood {self.likelihood!r}; allowed: {', '.join(LIKELIHOODS)}"
            )
        if self.likelihood == "gaussian":
            if self.num_classes is not None:
                raise ValueError("num_classes applies to the categorical likelihood only")
            if self.noise == "learned":
                return
            if not _is_number(self.noise) or not (0 < self.noise < float("inf")):
                raise ValueError(
                    "gaussian likelihood needs noise: a finite known std > 0 or 'learned', "
                    f"got {self.noise!r}"
                )
            object.__setattr__(self, "noise", float(self.noise))
        else:
            if self.noise is not None:
                raise ValueError("noise applies to the gaussian likelihood only")
            if not _is_int(self.num_classes) or self.num_classes < 2:
                raise ValueError(
                    f"categorical likelihood needs num_classes >= 2, got {self.num_classes!r}"
                )
            object.__setattr__(self, "num_classes", int(self.num_classes))

    def _resolve_scales(self) -> tuple[float, ...]:
        n_layers = len(self.hidden) + 1
        scales = self.prior_scale
        if isinstance(scales, np.ndarray):
            scales = scales.tolist()
        if _is_number(scales):
            object.__setattr__(self, "prior_scale", float(scales))
            scales = (float(scales),) * n_layers
        elif isinstance(scales, Sequence) and not isinstance(scales, str):
            scales = tuple(scales)
            if len(scales) != n_layers:
                raise ValueError(
                    f"prior_scale has {len(scales)} values but the network has {n_layers} "
                    "layers (len(hidden) + 1)"
                )
        else:
            raise ValueError(
                f"prior_scale must be a number or one number per layer, got {self.prior_scale!r}"
            )
        for s in scales:
            if not _is_number(s) or not (0 < s < float("inf")):
                raise ValueError(f"prior_scale values must be finite and > 0, got {scales!r}")
        if not _is_number(self.prior_scale):
            object.__setattr__(self, "prior_scale", tuple(float(s) for s in scales))
        widths = self.widths
        return tuple(
            float(s) / sqrt(widths[i]) if self.fan_in_scaling else float(s)
            for i, s in enumerate(scales)
        )

    @property
    def output_dim(self) -> int:
        """Width of the network output: 1 for regression, K for classification."""
        return 1 if self.likelihood == "gaussian" else int(self.num_classes)

    @property
    def widths(self) -> tuple[int, ...]:
        """All layer widths from input to output."""
        return (self.input_dim, *self.hidden, self.output_dim)

    @property
    def num_layers(self) -> int:
        return len(self.hidden) + 1

    @property
    def layer_scales(self) -> tuple[float, ...]:
        """Effective prior std of each layer's weights and biases."""
        return self._layer_scales

    @property
    def learned_noise(self) -> bool:
        return self.likelihood == "gaussian" and self.noise == "learned"

    def sites(self) -> tuple[Site, ...]:
        """Every latent site in model order: ``w0, b0, w1, b1, ...`` then ``precision``."""
        out: list[Site] = []
        widths = self.widths
        for layer in range(self.num_layers):
            scale = self._layer_scales[layer]
            fan_in, fan_out = widths[layer], widths[layer + 1]
            out.append(Site(name=f"w{layer}", shape=(fan_in, fan_out), prior=("normal", scale)))
            out.append(Site(name=f"b{layer}", shape=(fan_out,), prior=("normal", scale)))
        if self.learned_noise:
            out.append(Site(name=PRECISION_SITE, shape=(), prior=("gamma", LEARNED_NOISE_PRIOR)))
        return tuple(out)

    def site_dims(self) -> dict[str, list[str]]:
        """ArviZ dimension names of every site (``layer{l}_in``, ``layer{l}_out``)."""
        dims: dict[str, list[str]] = {}
        for layer in range(self.num_layers):
            dims[f"w{layer}"] = [f"layer{layer}_in", f"layer{layer}_out"]
            dims[f"b{layer}"] = [f"layer{layer}_out"]
        if self.learned_noise:
            dims[PRECISION_SITE] = []
        return dims

    def to_dict(self) -> dict:
        """JSON-ready description that :meth:`from_dict` turns back into an equal spec."""
        return {
            "input_dim": self.input_dim,
            "hidden": list(self.hidden),
            "activation": self.activation,
            "prior_scale": (
                list(self.prior_scale) if isinstance(self.prior_scale, tuple) else self.prior_scale
            ),
            "fan_in_scaling": self.fan_in_scaling,
            "likelihood": self.likelihood,
            "noise": self.noise,
            "num_classes": self.num_classes,
        }

    @classmethod
    def from_dict(cls, data: dict) -> BNNSpec:
        data = dict(data)
        data["hidden"] = tuple(data["hidden"])
        if isinstance(data["prior_scale"], list):
            data["prior_scale"] = tuple(data["prior_scale"])
        return cls(**data)
