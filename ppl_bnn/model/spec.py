r"""Backend-neutral description of a Bayesian neural network.

A :class:`BNNSpec` says everything needed to write the model down in any PPL: a stack of layers
(:mod:`ppl_bnn.model.layers`) mapping inputs :math:`x` to outputs :math:`f`, a prior per
parametrised layer (:mod:`ppl_bnn.model.priors`) on its weights and biases, and either a Gaussian
likelihood :math:`y \sim \mathcal N(f, \sigma^2)` or a categorical one
:math:`y \sim \text{Categorical}(\text{softmax}(f))`. For the MLP of :meth:`BNNSpec.mlp`,

.. math::

    h_0 = x,\qquad h_{l+1} = \phi(h_l W_l + b_l)\ (l < L),\qquad f = h_L W_L + b_L,

    W_l \sim \mathcal N(0, s_l^2),\quad b_l \sim \mathcal N(0, s_l^2),

with :math:`s_l` = ``prior_scale`` (optionally divided by :math:`\sqrt{\text{fan\_in}_l}`).

With ``noise="learned"`` the Gaussian noise precision :math:`\tau = \sigma^{-2}` gets a
:math:`\text{Gamma}(a, b)` prior (shape :math:`a`, rate :math:`b`), by default
:data:`DEFAULT_NOISE_PRIOR` = Gamma(1, 0.1). With :math:`N` residuals of sum of squares
:math:`R`, the conjugate posterior is :math:`\text{Gamma}(a + N/2, b + R/2)` (Bishop 2006,
*Pattern Recognition and Machine Learning*, section 2.3.6), so

.. math::

    \mathbb E[\sigma^2 \mid R] = \frac{b + R/2}{a + N/2 - 1} \ \ge\ \frac{b}{a + N/2 - 1}:

the prior puts a floor under the noise. Probabilistic backpropagation's Gamma(6, 6)
(Hernández-Lobato & Adams 2015; :data:`~ppl_bnn.model.priors.PBP_NOISE_PRIOR`) floors
:math:`\sigma` at about 0.2 of the target std on a standardised UCI set of 300 points, above the
residuals of a good fit (PBP itself escapes the floor through repeated ADF passes); Gamma(1, 0.1),
an exponential prior on the precision with mean 10, floors it 60x lower in variance (about 0.026
of the target std there) and lets the noise shrink to the residuals.

This module imports neither torch nor jax.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from math import prod, sqrt
from typing import Any, Literal

import numpy as np

from ppl_bnn.model.layers import ACTIVATIONS, Dense, Layer, check_activation, layer_from_dict
from ppl_bnn.model.priors import (
    PBP_NOISE_PRIOR,
    Gamma,
    HierarchicalPrior,
    Normal,
    Prior,
    SitePrior,
    prior_from_dict,
)
from ppl_bnn.model.scalars import is_int, is_number

__all__ = ["ACTIVATIONS", "DEFAULT_NOISE_PRIOR", "LIKELIHOODS", "PRECISION_SITE", "BNNSpec", "Site"]

LIKELIHOODS: tuple[str, ...] = ("gaussian", "categorical")

#: Prior of every weight and bias unless one is given.
DEFAULT_PRIOR = Normal(1.0)

#: Prior on the noise precision when ``noise="learned"`` and no other is given: weakly
#: informative, with a floor under the noise far below the residuals of a good fit (see above).
DEFAULT_NOISE_PRIOR = Gamma(1.0, 0.1)

PRECISION_SITE = "precision"


@dataclass(frozen=True, kw_only=True)
class Site:
    """One latent variable of the model.

    Attributes:
        name: Site name, identical in every backend (``w0``, ``b0``, ..., ``precision``;
            ``w0_tau``, ... for a hierarchical prior's latent sites).
        shape: Shape of one draw of the site.
        prior: Its prior (:mod:`ppl_bnn.model.priors`).
        latent: ``(suffix, site name)`` of each latent site its prior is conditional on (a
            :class:`~ppl_bnn.model.priors.HierarchicalPrior`'s); empty for the others.
    """

    name: str
    shape: tuple[int, ...]
    prior: SitePrior
    latent: tuple[tuple[str, str], ...] = ()

    @property
    def positive(self) -> bool:
        """Whether the site lives on (0, inf) (its unconstrained transform is ``exp``)."""
        return self.prior.positive

    @property
    def size(self) -> int:
        return prod(self.shape)

    def prior_given(self, values: Mapping[str, Any]) -> Prior:
        """Its prior, given its latent sites' (constrained) ``values`` by site name where its
        prior is hierarchical."""
        if not self.latent:
            return self.prior
        return self.prior.given({suffix: values[name] for suffix, name in self.latent})


def check_likelihood_name(likelihood: object) -> None:
    """``ValueError`` listing the allowed names unless ``likelihood`` is one of them."""
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {likelihood!r}; allowed: {', '.join(LIKELIHOODS)}")


def _check_likelihood(
    likelihood: object, noise: object, num_classes: object
) -> tuple[float | str | None, int | None]:
    """``(noise, num_classes)`` normalised, or ``ValueError`` naming what does not fit."""
    check_likelihood_name(likelihood)
    if likelihood == "gaussian":
        if num_classes is not None:
            raise ValueError("num_classes applies to the categorical likelihood only")
        if noise == "learned":
            return "learned", None
        if not is_number(noise) or not (0 < noise < float("inf")):
            raise ValueError(
                "gaussian likelihood needs noise: a finite known std > 0 or 'learned', "
                f"got {noise!r}"
            )
        return float(noise), None
    if noise is not None:
        raise ValueError("noise applies to the gaussian likelihood only")
    if not is_int(num_classes) or num_classes < 2:
        raise ValueError(f"categorical likelihood needs num_classes >= 2, got {num_classes!r}")
    return None, int(num_classes)


def _check_input_dim(input_dim: object) -> int:
    if not is_int(input_dim) or input_dim < 1:
        raise ValueError(f"input_dim must be a positive integer, got {input_dim!r}")
    return int(input_dim)


def _check_input_shape(input_dim: object, input_shape: object) -> tuple[int, ...]:
    """One example's shape from ``input_shape`` or ``input_dim`` (flat: ``(input_dim,)``);
    ``ValueError`` if neither is given, either is bad, or they disagree."""
    if input_shape is None:
        if input_dim is None:
            raise ValueError("give input_dim (flat inputs) or input_shape (e.g. (H, W, C))")
        return (_check_input_dim(input_dim),)
    shape = _as_tuple(input_shape)
    if not isinstance(shape, tuple) or not shape or not all(is_int(n) and n >= 1 for n in shape):
        raise ValueError(
            f"input_shape must be a non-empty sequence of positive integers, got {input_shape!r}"
        )
    shape = tuple(int(n) for n in shape)
    if input_dim is not None and _check_input_dim(input_dim) != prod(shape):
        raise ValueError(
            f"input_dim {input_dim} disagrees with input_shape {shape} ({prod(shape)} values)"
        )
    return shape


def _as_tuple(value: object) -> object:
    """Lists and arrays as tuples; anything else (strings and bytes too) unchanged, for
    validation to judge."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return tuple(value)
    return value


@dataclass(frozen=True, kw_only=True)
class BNNSpec:
    """A Bayesian network: layers, priors and likelihood.

    Args:
        input_dim: Number of input features D, for flat inputs (N, D).
        input_shape: One example's shape instead, e.g. (H, W, C) for images (N, H, W, C),
            channels last; ``input_dim`` is then its number of values.
        layers: The layers from input to output (the last one's width is the output width: 1 for
            regression, ``num_classes`` for classification).
        priors: One prior for every weight and bias, or one per parametrised layer.
        likelihood: ``"gaussian"`` or ``"categorical"``.
        noise: Gaussian likelihood only: a known noise std (> 0) or ``"learned"``.
        num_classes: Categorical likelihood only: the number of classes K (>= 2).
        noise_prior: ``noise="learned"`` only: the prior on the noise precision, a prior with
            positive support (default :data:`DEFAULT_NOISE_PRIOR`; PBP's is
            :data:`~ppl_bnn.model.priors.PBP_NOISE_PRIOR`).

    :meth:`mlp` builds the spec of a fully connected network from layer widths.
    """

    input_dim: int | None = None
    input_shape: tuple[int, ...] | None = None
    layers: tuple[Layer, ...]
    priors: SitePrior | tuple[SitePrior, ...] = DEFAULT_PRIOR
    likelihood: Literal["gaussian", "categorical"] = "gaussian"
    noise: float | Literal["learned"] | None = None
    num_classes: int | None = None
    noise_prior: Prior | None = None

    def __post_init__(self) -> None:
        shape = _check_input_shape(self.input_dim, self.input_shape)
        object.__setattr__(self, "input_shape", shape)
        object.__setattr__(self, "input_dim", prod(shape))
        noise, num_classes = _check_likelihood(self.likelihood, self.noise, self.num_classes)
        object.__setattr__(self, "noise", noise)
        object.__setattr__(self, "num_classes", num_classes)
        object.__setattr__(self, "noise_prior", _check_noise_prior(self.noise_prior, noise))
        layers = _as_tuple(self.layers)
        if not isinstance(layers, tuple) or not layers:
            raise ValueError(f"layers must be a non-empty sequence of layers, got {self.layers!r}")
        for layer in layers:
            if not isinstance(layer, Layer):
                raise ValueError(f"not a layer: {layer!r} (see ppl_bnn.layers)")
        object.__setattr__(self, "layers", layers)
        shape = self._shapes[-1]
        if shape != (self.output_dim,):
            raise ValueError(
                f"the last layer gives outputs of shape {shape}, but the {self.likelihood} "
                f"likelihood needs {self.output_dim} output(s)"
            )
        object.__setattr__(self, "priors", self._check_priors())

    @cached_property
    def _shapes(self) -> tuple[tuple[int, ...], ...]:
        """Per-example shapes from the input through every layer."""
        shapes = [self.input_shape]
        for layer in self.layers:
            shapes.append(tuple(layer.output_shape(shapes[-1])))
        return tuple(shapes)

    def _check_priors(self) -> tuple[SitePrior, ...]:
        count = self.num_layers
        priors = self.priors
        if _is_prior(priors):
            return (priors,) * count
        priors = _as_tuple(priors)
        if not isinstance(priors, tuple) or not all(_is_prior(p) for p in priors):
            raise ValueError(f"priors must be a prior or one prior per layer, got {self.priors!r}")
        if len(priors) != count:
            raise ValueError(f"{len(priors)} priors given but the network has {count} layers")
        learned = {p for p in priors if p.learned}
        if len(learned) > 1:
            raise ValueError(
                "learned priors share one set of hyperparameters across layers: give every "
                f"layer the same learned prior, got {sorted(learned, key=repr)!r}"
            )
        return priors

    @property
    def learned_prior(self) -> Prior | None:
        """The prior whose hyperparameters are fitted with the model (one, shared by every
        layer that carries it), or None."""
        return next((p for p in self.priors if p.learned), None)

    @property
    def hierarchical_prior(self) -> HierarchicalPrior | None:
        """The first prior with latent sites of its own, or None."""
        return next((p for p in self.priors if isinstance(p, HierarchicalPrior)), None)

    @classmethod
    def mlp(
        cls,
        *,
        input_dim: int,
        hidden: Sequence[int] | int = (),
        activation: str = "tanh",
        prior_scale: float | Sequence[float] = 1.0,
        fan_in_scaling: bool = False,
        likelihood: Literal["gaussian", "categorical"] = "gaussian",
        noise: float | Literal["learned"] | None = None,
        num_classes: int | None = None,
        noise_prior: Prior | None = None,
    ) -> BNNSpec:
        """A fully connected network with Normal priors.

        Args:
            input_dim: Number of input features D.
            hidden: Widths of the hidden layers; ``()`` gives Bayesian linear / softmax
                regression.
            activation: One of :data:`ACTIVATIONS` (``gelu`` is the exact, erf-based GELU).
            prior_scale: Prior std of every weight and bias, one number or one per layer
                (``len(hidden) + 1`` values).
            fan_in_scaling: Divide each layer's prior std by ``sqrt(fan_in)``.
            likelihood, noise, num_classes, noise_prior: As for :class:`BNNSpec`.
        """
        input_dim = _check_input_dim(input_dim)
        hidden = _check_hidden(hidden)
        if not isinstance(fan_in_scaling, bool):
            raise ValueError(f"fan_in_scaling must be True or False, got {fan_in_scaling!r}")
        check_activation(activation)
        _, classes = _check_likelihood(likelihood, noise, num_classes)
        output_dim = 1 if likelihood == "gaussian" else classes
        scales = _check_scales(prior_scale, len(hidden) + 1)
        fan_ins = (input_dim, *hidden)
        if fan_in_scaling:
            scales = tuple(s / sqrt(fan_in) for s, fan_in in zip(scales, fan_ins, strict=True))
        layers = (*(Dense(width, activation) for width in hidden), Dense(output_dim))
        return cls(
            input_dim=input_dim,
            layers=layers,
            priors=tuple(Normal(s) for s in scales),
            likelihood=likelihood,
            noise=noise,
            num_classes=num_classes,
            noise_prior=noise_prior,
        )

    @property
    def output_dim(self) -> int:
        """Width of the network output: 1 for regression, K for classification."""
        return 1 if self.likelihood == "gaussian" else int(self.num_classes)

    @property
    def widths(self) -> tuple[int, ...]:
        """Size of one example's activations from input to output, layer by layer."""
        return tuple(prod(shape) for shape in self._shapes)

    @property
    def hidden(self) -> tuple[int, ...]:
        """Widths of the hidden layers (all but the output)."""
        return self.widths[1:-1]

    @property
    def num_layers(self) -> int:
        """Number of layers with parameters (each has one prior)."""
        return sum(1 for _ in self._param_layers())

    @property
    def layer_scales(self) -> tuple[float | None, ...]:
        """Prior std of each parametrised layer's weights and biases (None if not Normal)."""
        return tuple(getattr(p, "scale", None) for p in self.priors)

    @property
    def learned_noise(self) -> bool:
        return self.likelihood == "gaussian" and self.noise == "learned"

    def _param_layers(self) -> Any:
        """``(index, layer, input_shape, {kind: shape})`` for every layer with parameters."""
        index = 0
        for layer, shape in zip(self.layers, self._shapes, strict=False):
            params = layer.param_shapes(shape)
            if params:
                yield index, layer, shape, params
                index += 1

    @cached_property
    def layer_params(self) -> tuple[tuple[Layer, dict[str, str]], ...]:
        """Every layer with, per parameter kind, the site holding it (``{}`` if none)."""
        out, index = [], 0
        for layer, shape in zip(self.layers, self._shapes, strict=False):
            kinds = layer.param_shapes(shape)
            out.append((layer, {kind: f"{kind}{index}" for kind in kinds}))
            index += bool(kinds)
        return tuple(out)

    def sites(self) -> tuple[Site, ...]:
        """Every latent site in model order: ``w0, b0, w1, b1, ...`` then ``precision``; a
        hierarchical prior's latent sites just before the site they scale (``w0_tau``,
        ``w0_lambda``, ``w0``, ...)."""
        out: list[Site] = []
        for index, _, _, params in self._param_layers():
            prior = self.priors[index]
            for kind, shape in params.items():
                name = f"{kind}{index}"
                latent = _latent_sites(name, shape, prior)
                out.extend(site for _, site in latent)
                pairs = tuple((suffix, site.name) for suffix, site in latent)
                out.append(Site(name=name, shape=shape, prior=prior, latent=pairs))
        if self.learned_noise:
            out.append(Site(name=PRECISION_SITE, shape=(), prior=self.noise_prior))
        return tuple(out)

    def site_dims(self) -> dict[str, list[str]]:
        """ArviZ dimension names of every site (``layer{l}_in``, ``layer{l}_out`` for Dense)."""
        dims: dict[str, list[str]] = {}
        for index, layer, _, params in self._param_layers():
            names = layer.param_dims(index)
            dims.update({f"{kind}{index}": names[kind] for kind in params})
        sites = self.sites()
        shapes = {s.name: s.shape for s in sites}
        for site in sites:  # a latent site's axes are the trailing ones of its site's
            for _, name in site.latent:
                dims[name] = dims[site.name][len(site.shape) - len(shapes[name]) :]
        if self.learned_noise:
            dims[PRECISION_SITE] = []
        return dims

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description that :meth:`from_dict` turns back into an equal spec."""
        # Flat specs keep the form written before image inputs; images write their shape.
        if len(self.input_shape) == 1:
            shape: dict[str, Any] = {"input_dim": self.input_dim}
        else:
            shape = {"input_shape": list(self.input_shape)}
        return {
            **shape,
            "layers": [layer.to_dict() for layer in self.layers],
            "priors": [prior.to_dict() for prior in self.priors],
            "likelihood": self.likelihood,
            "noise": self.noise,
            "num_classes": self.num_classes,
            "noise_prior": None if self.noise_prior is None else self.noise_prior.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BNNSpec:
        """The spec :meth:`to_dict` wrote (or, from earlier versions, :meth:`mlp`'s arguments)."""
        data = dict(data)
        if data.get("noise") == "learned" and "noise_prior" not in data:
            # Written before the noise prior was a choice: every such fit used PBP's.
            data["noise_prior"] = PBP_NOISE_PRIOR
        elif data.get("noise_prior") is not None and not isinstance(data["noise_prior"], Prior):
            data["noise_prior"] = prior_from_dict(data["noise_prior"])
        if "hidden" in data:  # written before layers and priors were objects
            return cls.mlp(**data)
        data["layers"] = tuple(layer_from_dict(layer) for layer in data["layers"])
        data["priors"] = tuple(prior_from_dict(prior) for prior in data["priors"])
        return cls(**data)


def _is_prior(value: object) -> bool:
    return isinstance(value, Prior | HierarchicalPrior)


def _latent_sites(name: str, shape: tuple[int, ...], prior: SitePrior) -> list[tuple[str, Site]]:
    """``(suffix, site)`` of each latent site of site ``name`` under ``prior`` (none unless it
    is hierarchical)."""
    if not isinstance(prior, HierarchicalPrior):
        return []
    return [
        (suffix, Site(name=f"{name}_{suffix}", shape=tuple(latent_shape), prior=latent_prior))
        for suffix, (latent_shape, latent_prior) in prior.latent_sites(shape).items()
    ]


def _check_noise_prior(prior: object, noise: object) -> Prior | None:
    """The noise-precision prior of a learned noise (the default when None); None otherwise."""
    if noise != "learned":
        if prior is not None:
            raise ValueError("noise_prior applies to noise='learned' only")
        return None
    if prior is None:
        return DEFAULT_NOISE_PRIOR
    if not isinstance(prior, Prior) or not prior.positive:
        raise ValueError(
            "noise_prior must be a prior on (0, inf) for the noise precision, such as "
            f"ppl_bnn.priors.Gamma(1.0, 0.1), got {prior!r}"
        )
    return prior


def _check_hidden(hidden: object) -> tuple[int, ...]:
    if is_int(hidden):
        hidden = (hidden,)
    hidden = _as_tuple(hidden)
    if not isinstance(hidden, tuple):
        raise ValueError(f"hidden must be a sequence of layer widths, got {hidden!r}")
    for width in hidden:
        if not is_int(width) or width < 1:
            raise ValueError(f"hidden layer widths must be positive integers, got {hidden!r}")
    return tuple(int(w) for w in hidden)


def _check_scales(prior_scale: object, num_layers: int) -> tuple[float, ...]:
    scales = _as_tuple(prior_scale)
    if is_number(scales):
        scales = (scales,) * num_layers
    elif not isinstance(scales, tuple):
        raise ValueError(
            f"prior_scale must be a number or one number per layer, got {prior_scale!r}: "
            f"a {type(scales).__name__}, not a number"
        )
    not_numbers = [s for s in scales if not is_number(s)]
    if not_numbers:
        raise ValueError(
            f"prior_scale values must be finite and > 0, got {prior_scale!r}: "
            f"{not_numbers[0]!r} is a {type(not_numbers[0]).__name__}, not a number"
        )
    if len(scales) != num_layers:
        raise ValueError(
            f"prior_scale has {len(scales)} values but the network has {num_layers} "
            "layers (len(hidden) + 1)"
        )
    for s in scales:
        if not is_number(s) or not (0 < s < float("inf")):
            raise ValueError(f"prior_scale values must be finite and > 0, got {scales!r}")
    return tuple(float(s) for s in scales)
