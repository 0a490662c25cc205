r"""Training-time dropout on the input of every dense layer (``mcdropout``), written once for both
backends.

MC dropout (Gal & Ghahramani 2016) trains the network with a fresh Bernoulli mask on the input
units of every dense layer at every step, as Gal's UCI code does (a ``Dropout`` before each
``Dense``, the output layer included), with inverted scaling:

.. math:: h \mapsto \frac{h \odot m}{1 - p}, \qquad m_{ik} \sim \mathrm{Bernoulli}(1 - p)

per example :math:`i` and unit :math:`k`. Convolutions are left as they are (dropout applies to
the dense layers of a network only). The masks are drawn with the backend's seeded randomness
(:attr:`PPL.draw <ppl_bnn.model.program.PPL>`: NumPyro's ``prng_key`` under the seed handler of
SVI, torch's generator seeded for the fit on Pyro), so they are not sites of the model and the
log joint of a step is :math:`\log p(\theta) + c \log p(y_B \mid x_B, \theta, m)`: MAP on it is
MC dropout's training with the weight decay of the prior.

With ``concrete=True`` (concrete dropout; Gal, Hron & Kendall 2017) the rate :math:`p_l` of each
dense layer's input is a ``param`` site of the model (``dropout_rate{l}``, on (0, 1)), the masks
are relaxed,

.. math:: m = 1 - \sigma\big((\operatorname{logit} p + \log u - \log(1 - u)) / t\big),
          \qquad u \sim U(0, 1),

(the library's ``RelaxedBernoulli`` with temperature :math:`t` draws :math:`1 - m`), and the
log joint gains the regulariser of their KL term and code: the weight term of layer :math:`l`
scaled by :math:`1 / (1 - p_l)` and the dropout entropy of its :math:`K_l` input units,

.. math:: \sum_l \Big[\frac{p_l}{1 - p_l}\big(\log p(W_l) - \log p(W_l = 0)\big)
          + \lambda K_l\, \mathcal H(p_l)\Big],
          \qquad \mathcal H(p) = -p \log p - (1 - p) \log(1 - p),

added to :math:`\log p(W_l)` so that the prior's weight decay (:math:`-\lVert W_l \rVert^2 /
2 s^2` for a Normal prior; taken relative to :math:`W_l = 0`, so that a prior's normalising
constant does not pull on :math:`p_l`) is divided by :math:`1 - p_l`. :math:`\lambda` is
``regularizer`` (their ``dropout_regularizer`` times N, the log joint being summed over the
data; 1 is the coefficient of :math:`K \mathcal H(p)` in their KL). Biases keep their prior.

References: Y. Gal, Z. Ghahramani. Dropout as a Bayesian Approximation: Representing Model
Uncertainty in Deep Learning. ICML 2016. Y. Gal, J. Hron, A. Kendall. Concrete Dropout.
NeurIPS 2017.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ppl_bnn.model.layers import Dense
from ppl_bnn.model.program import PPL, prior
from ppl_bnn.model.spec import BNNSpec

#: Prefix of concrete dropout's rate sites: ``dropout_rate{l}`` for the input of dense layer ``l``
#: (``l`` the index of its weight site ``w{l}``).
RATE_PREFIX = "dropout_rate"
#: The fixed rate's name among the model's numbers (:meth:`Dropout.numbers`).
RATE_NUMBER = "dropout_rate"


def dense_weights(spec: BNNSpec) -> list[tuple[str, int]]:
    """``(weight site, input units)`` of every dense layer, input to output."""
    shapes = {s.name: s.shape for s in spec.sites()}
    return [
        (sites["w"], shapes[sites["w"]][0])
        for layer, sites in spec.layer_params
        if isinstance(layer, Dense)
    ]


def rate_site(weight: str) -> str:
    """The rate site of the dense layer with weight site ``weight`` (``w2``: ``dropout_rate2``)."""
    return RATE_PREFIX + weight[1:]


@dataclass(frozen=True)
class Dropout:
    """Dropout on the input of every dense layer while training (see the module docstring).

    Attributes:
        rate: :math:`p`, in [0, 1); with ``concrete``, each layer's initial rate, in (0, 1).
        concrete: Learn each layer's rate (concrete dropout).
        temperature: :math:`t` of the relaxed masks (``concrete`` only).
        regularizer: :math:`\\lambda`, the weight of the dropout entropy (``concrete`` only).
    """

    rate: float
    concrete: bool = False
    temperature: float = 0.1
    regularizer: float = 1.0

    def numbers(self) -> dict[str, float]:
        """The fixed rate as one of the model's numbers (:func:`~ppl_bnn.model.program.
        model_numbers`), which a compiled program takes as an argument; none with concrete
        dropout, whose rates are sites."""
        return {} if self.concrete else {RATE_NUMBER: self.rate}

    def numberless(self) -> Dropout:
        """This dropout without its :meth:`numbers`: what a program given them depends on."""
        return self if self.concrete else replace(self, rate=0.0)

    def network(
        self, spec: BNNSpec, ppl: PPL
    ) -> Callable[[Mapping[str, Any], Any, Mapping[str, Any] | None], Any]:
        """``network(params, x, numbers)`` for :func:`~ppl_bnn.model.program.bnn_model`: the
        forward pass with masks on every dense layer's input, at the fixed rate of ``numbers``
        where given (:meth:`numbers`) (with concrete dropout, also the rate sites and
        the regulariser, a ``factor`` of the model, whose prior stds come from ``numbers``
        where given)."""

        def network(params: Mapping[str, Any], x: Any, numbers: Mapping[str, Any] | None) -> Any:
            rates = self._rates(spec, ppl, numbers)
            if self.concrete:
                regulariser = self._regulariser(spec, params, rates, ppl, numbers)
                ppl.factor("dropout_regularizer", regulariser)
            h = x
            for layer, sites in spec.layer_params:
                if isinstance(layer, Dense):
                    draws = tuple(params[sites["w"]].shape[:-2])
                    h = self._mask(h, rates[sites["w"]], draws, ppl)
                h = layer.forward({kind: params[name] for kind, name in sites.items()}, h, ppl)
            return h

        return network

    def _rates(self, spec: BNNSpec, ppl: PPL, numbers: Mapping[str, Any] | None) -> dict[str, Any]:
        """Weight site -> the rate of its layer's input: the fixed rate (from ``numbers`` where
        given: :meth:`numbers`), or a rate site."""
        if not self.concrete:
            rate = self.rate if numbers is None else numbers[RATE_NUMBER]
            return {w: rate for w, _ in dense_weights(spec)}
        unit = ppl.dist.constraints.unit_interval
        return {w: ppl.param(rate_site(w), self.rate, unit) for w, _ in dense_weights(spec)}

    def _mask(self, h: Any, rate: Any, draws: tuple[int, ...], ppl: PPL) -> Any:
        """:math:`h \\odot m / (1 - p)`, one mask entry per example and unit of ``h`` and per
        draw of the weights (``draws``, their leading axes: vectorised particles), so that an
        input ``x`` shared by every draw gets a mask of its own in each."""
        lead = draws if len(draws) >= len(h.shape) - 2 else tuple(h.shape[:-2])
        shape = (*lead, *h.shape[-2:])
        if self.concrete:
            dropped = ppl.draw(ppl.dist.RelaxedBernoulli(self.temperature, probs=rate), shape)
            keep = 1.0 - dropped
        else:
            keep = ppl.draw(ppl.dist.Bernoulli(probs=1.0 - rate), shape)
        return h * keep / (1.0 - rate)

    def _regulariser(
        self,
        spec: BNNSpec,
        params: Mapping[str, Any],
        rates: Mapping[str, Any],
        ppl: PPL,
        numbers: Mapping[str, Any] | None,
    ) -> Any:
        """The concrete dropout terms added to the log joint (module docstring)."""
        sites = {s.name: s for s in spec.sites()}
        total = 0.0
        for weight, units in dense_weights(spec):
            p, w = rates[weight], params[weight]
            dist = prior(sites[weight], ppl, params, numbers=numbers)
            decay = dist.log_prob(w).sum() - dist.log_prob(w * 0.0).sum()
            entropy = ppl.dist.Bernoulli(probs=p).entropy()
            total = total + p / (1.0 - p) * decay + self.regularizer * units * entropy
        return total
