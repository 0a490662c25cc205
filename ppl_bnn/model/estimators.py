r"""Gradient estimators of a mean-field Gaussian guide: how one layer's output is sampled.

For a layer with factorised Gaussian weights :math:`q(W) = \mathcal N(\mu, \sigma^2)` and biases
:math:`q(b) = \mathcal N(\mu_b, \sigma_b^2)`, three unbiased ways to sample its pre-activations
:math:`a` for a minibatch of inputs :math:`h` (written for a Dense layer, :math:`a = hW + b`):

- ``reparam``: one draw :math:`W = \mu + \sigma\epsilon` shared by the whole minibatch
  (Kingma & Welling 2014; Blundell et al. 2015).
- ``local_reparam``: the pre-activations sampled per example from their exact Gaussian,
  :math:`\gamma = h\mu + \mu_b`, :math:`\delta = h^2\sigma^2 + \sigma_b^2`,
  :math:`a = \gamma + \sqrt\delta\,\epsilon` with :math:`\epsilon \sim \mathcal N(0, 1)` per
  example and unit (Kingma, Salimans & Welling 2015, "Variational dropout and the local
  reparameterization trick").
- ``flipout``: one shared perturbation :math:`\Delta W = \sigma\epsilon`,
  :math:`\Delta b = \sigma_b\epsilon_b`, decorrelated per example by Rademacher sign vectors
  :math:`s_\text{in}, s_\text{out}`:
  :math:`a = h\mu + \mu_b + \big((h \circ s_\text{in})\Delta W + \Delta b\big) \circ s_\text{out}`
  (Wen et al. 2018, "Flipout: Efficient pseudo-independent weight perturbations on
  mini-batches"). Each example's perturbation has the law of :math:`\Delta W`, since a symmetric
  independent perturbation keeps its law under sign flips.

The two per-example estimators give the same expected gradient as ``reparam`` with lower variance
for minibatches of more than one example. The math is written once here against the backend's
array operations (its :class:`~ppl_bnn.model.program.PPL`, ``ppl``); what a layer kind
contributes is its :class:`LinearMap` in :data:`LINEAR_MAPS`: its affine map and the shapes of
its sign vectors (a convolution's per channel).

This module imports neither torch nor jax.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ppl_bnn.model.layers import Conv2d, Dense, Layer

#: The estimators, ``reparam`` first (the default).
ESTIMATORS: tuple[str, ...] = ("reparam", "local_reparam", "flipout")


def check_estimator(estimator: object) -> str:
    """``estimator`` if it is one of :data:`ESTIMATORS`; ``ValueError`` listing them otherwise."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; available: {', '.join(ESTIMATORS)}")
    return str(estimator)


class Noise(Protocol):
    """A source of standard random arrays in the backend's framework."""

    def normal(self, shape: tuple[int, ...]) -> Any:
        """Independent N(0, 1) draws of ``shape``."""

    def rademacher(self, shape: tuple[int, ...]) -> Any:
        """Independent uniform signs (+1 or -1, floats) of ``shape``."""


@dataclass(frozen=True)
class LinearMap:
    """What the estimators need of a parametrised layer kind.

    Attributes:
        affine: ``(layer, w, b, h, ppl) -> a``: the pre-activation for weights ``w``, biases
            ``b`` and input batch ``h`` (N, *input_shape), with the PPL's array operations;
            linear in ``(w, b)`` and in ``h`` given ``w``.
        input_signs: Input batch shape -> shape of Flipout's input signs (one per example and
            input unit, broadcast over the rest).
        output_signs: Pre-activation batch shape -> shape of Flipout's output signs.
        local: Whether ``local_reparam`` is exact for the layer: its outputs must be independent
            given the input, as a dense layer's are. A convolution's outputs at different
            positions share weights, so sampling each independently changes the ELBO (the
            gradient is biased): it runs with ``reparam`` or ``flipout`` only.
    """

    affine: Callable[[Layer, Any, Any, Any, Any], Any]
    input_signs: Callable[[tuple[int, ...]], tuple[int, ...]]
    output_signs: Callable[[tuple[int, ...]], tuple[int, ...]]
    local: bool = True


def _dense_affine(layer: Layer, w: Any, b: Any, h: Any, ppl: Any) -> Any:
    return h @ w + b


def _conv_affine(layer: Any, w: Any, b: Any, h: Any, ppl: Any) -> Any:
    pads = layer.padding_amounts(tuple(int(n) for n in h.shape[-3:]))
    return ppl.conv2d(h, w, layer.stride, pads) + b[..., None, None, None, :]


def _same(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape)


def _per_channel(shape: tuple[int, ...]) -> tuple[int, ...]:
    """One sign per example and channel of a (..., N, H, W, C) batch, shared over positions
    (Wen et al. 2018, sec. 3.2: a convolution's weights are shared across positions)."""
    return (*shape[:-3], 1, 1, shape[-1])


#: Per parametrised layer class, its :class:`LinearMap`; a layer kind missing here runs with
#: ``reparam`` only.
LINEAR_MAPS: dict[type, LinearMap] = {
    Dense: LinearMap(affine=_dense_affine, input_signs=_same, output_signs=_same),
    Conv2d: LinearMap(_conv_affine, _per_channel, _per_channel, local=False),
}


def linear_map(layer: Layer, estimator: str) -> LinearMap | None:
    """The :class:`LinearMap` of ``layer`` (None for ``reparam``, which needs none); a
    ``ValueError`` when the layer kind has none."""
    if estimator == "reparam":
        return None
    found = LINEAR_MAPS.get(type(layer))
    if found is None:
        raise ValueError(
            f"estimator {estimator!r} has no rule for layer {type(layer).__name__}; "
            "use estimator='reparam'"
        )
    if estimator == "local_reparam" and not found.local:
        raise ValueError(
            f"estimator 'local_reparam' is not exact for layer {type(layer).__name__}: its "
            "outputs share weights across positions, and sampling them independently biases "
            "the gradient; use estimator='flipout'"
        )
    return found


def layer_output(
    layer: Layer,
    estimator: str,
    loc: Mapping[str, Any],
    scale: Mapping[str, Any],
    h: Any,
    noise: Noise,
    ppl: Any,
) -> tuple[Any, dict[str, Any] | None]:
    """The output of ``layer`` for input batch ``h`` under the guide ``(loc, scale)`` (by
    parameter kind, ``"w"`` and ``"b"``), sampled by ``estimator``.

    Returns ``(output, weights)``: ``weights`` is the draw of the layer's parameters that the
    estimator made (``reparam``: the draw used; ``flipout``: :math:`\\mu + \\Delta W`), None for
    ``local_reparam``, which draws none. ``ppl`` is the backend's
    :class:`~ppl_bnn.model.program.PPL` (its activations).
    """
    mapping = linear_map(layer, estimator)
    if mapping is None:
        weights = {k: loc[k] + scale[k] * noise.normal(tuple(loc[k].shape)) for k in loc}
        return layer.forward(weights, h, ppl), weights
    mean = mapping.affine(layer, loc["w"], loc["b"], h, ppl)
    if estimator == "local_reparam":
        variance = mapping.affine(layer, scale["w"] ** 2, scale["b"] ** 2, h * h, ppl)
        a = mean + variance**0.5 * noise.normal(tuple(mean.shape))
        weights = None
    else:
        delta = {k: scale[k] * noise.normal(tuple(loc[k].shape)) for k in ("w", "b")}
        s_in = noise.rademacher(mapping.input_signs(tuple(h.shape)))
        s_out = noise.rademacher(mapping.output_signs(tuple(mean.shape)))
        a = mean + mapping.affine(layer, delta["w"], delta["b"], h * s_in, ppl) * s_out
        weights = {k: loc[k] + delta[k] for k in ("w", "b")}
    activation = getattr(layer, "activation", None)
    if activation is not None:
        a = ppl.activations[activation](a)
    return a, weights
