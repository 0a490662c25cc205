r"""Priors as small objects: each knows its distribution in a PPL, its support and an initial draw.

A prior is written once and used everywhere a site's prior matters: the model program (through
:meth:`distribution`, with the distributions of the program's
:class:`~ppl_bnn.model.program.PPL`), initial values (:meth:`sample`), the unconstrained
parametrisation samplers move in (:attr:`positive`, :meth:`unconstrain`) and a framework-free
log density on that parametrisation (:meth:`log_density_unconstrained`).

- :class:`Normal`: :math:`w \sim \mathcal N(0, s^2)` elementwise, on the real line.
- :class:`Gamma`: :math:`\tau \sim \text{Gamma}(a, b)` (shape :math:`a`, rate :math:`b`), on
  :math:`(0, \infty)`, sampled as :math:`u = \log \tau`.
- :class:`ScaleMixture`: :math:`w \sim \pi\,\mathcal N(0, \sigma_1^2) + (1 - \pi)\,\mathcal N(0,
  \sigma_2^2)` elementwise, on the real line (Blundell et al. 2015, "Weight Uncertainty in
  Neural Networks", sec. 3.3); with ``learned=True`` its three parameters are point-estimated
  with the fit (type-II maximum likelihood), one set shared by every layer that carries it.
- :class:`HalfCauchy`: :math:`\lambda \sim \mathcal C^+(0, s)` on :math:`(0, \infty)`, sampled as
  :math:`u = \log \lambda`: the scales of the horseshoe.
- :class:`Horseshoe`: :math:`w_{ij} \mid \tau, \lambda_j \sim \mathcal N(0, \tau^2\lambda_j^2)`
  with a scale :math:`\tau` per site and :math:`\lambda_j` per output unit, both half-Cauchy
  (Carvalho et al. 2010; node-wise, as Ghosh et al. 2019 put it on networks). It is a
  :class:`HierarchicalPrior`: its scales are latent sites of the model of their own.

A new prior is one class here satisfying :class:`Prior`, or :class:`HierarchicalPrior` for one
with latent sites.

This module imports neither torch nor jax.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ppl_bnn.model.scalars import is_number

#: The model program's PPL namespace (:class:`ppl_bnn.model.program.PPL`), named here by its
#: role only: the program builds on the spec, which holds priors.
PPL = Any

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@runtime_checkable
class Prior(Protocol):
    """What the model program, initialisation and samplers need of a prior."""

    #: Whether the support is (0, inf) (unconstrained by ``log``) rather than the real line.
    positive: bool
    #: Whether its :attr:`hyperparameters` are point-estimated with the fit (the model declares
    #: them as ``param`` sites and builds :meth:`distribution` from their values).
    learned: bool

    def distribution(self, ppl: PPL, shape: tuple[int, ...]) -> Any:
        """The prior of a site of ``shape`` in ``ppl``'s library (its ``dist`` module)."""

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """One draw of a site of ``shape`` (float64 numpy)."""

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        """``value`` mapped to the unconstrained space samplers move in."""

    def log_density_unconstrained(
        self, z: Any, exp: Callable[[Any], Any], log: Callable[[Any], Any]
    ) -> Any:
        """:math:`\\log p(T(z)) + \\log|\\det J_T(z)|` summed over a site, with array arithmetic
        (``exp`` and ``log`` are the framework's elementwise functions)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :func:`prior_from_dict` reads it back."""


@runtime_checkable
class HierarchicalPrior(Protocol):
    """A prior with latent sites of its own: the site's prior is conditional on them.

    The model declares each latent site before the site (``<site>_<suffix>``, with its own
    :class:`Prior`), and everything that needs the site's density asks :meth:`given` for its
    conditional prior at the latent values (:meth:`ppl_bnn.model.spec.Site.prior_given`): the
    program, initial draws, the mean-field KL, the framework-free potential.
    """

    positive: bool
    learned: bool

    def latent_sites(self, shape: tuple[int, ...]) -> dict[str, tuple[tuple[int, ...], Prior]]:
        """``{suffix: (shape, prior)}`` of the latent sites of a site of ``shape``. Each shape
        is a trailing part of ``shape`` (so that a value broadcasts against the site)."""

    def given(self, latent: Mapping[str, Any]) -> Prior:
        """The site's prior given its latent sites' values (constrained) by suffix, arrays of
        any framework, with leading batch axes where the program vectorises draws."""

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """One draw of a site of ``shape`` from the marginal prior (latent values drawn too)."""

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        """``value`` mapped to the unconstrained space samplers move in."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :func:`prior_from_dict` reads it back."""


#: What a site's prior may be.
SitePrior = Prior | HierarchicalPrior


def _event(distribution: Any, shape: tuple[int, ...]) -> Any:
    """``distribution`` over a whole site of ``shape`` (one event)."""
    if not shape:
        return distribution
    return distribution.expand(list(shape)).to_event(len(shape))


def _positive_finite(name: str, value: object) -> float:
    if not is_number(value):
        kind = type(value).__name__
        raise ValueError(f"{name} must be finite and > 0, got {value!r}: a {kind}, not a number")
    if not (0 < value < float("inf")):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return float(value)


def normal_distribution(ppl: PPL, shape: tuple[int, ...], scale: Any) -> Any:
    """:class:`Normal`'s distribution over a site of ``shape`` with std ``scale``, a number or an
    array of ``ppl``'s library (a compiled program's argument: :func:`~ppl_bnn.model.program.
    model_numbers`)."""
    return _event(ppl.dist.Normal(0.0, scale), shape)


@dataclass(frozen=True)
class Normal:
    """Zero-mean Normal prior with standard deviation ``scale``."""

    scale: float
    positive = False
    learned = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive_finite("Normal scale", self.scale))

    def distribution(self, ppl: PPL, shape: tuple[int, ...]) -> Any:
        return normal_distribution(ppl, shape, self.scale)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.normal(0.0, self.scale, size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return value

    def log_density_unconstrained(
        self, z: Any, exp: Callable[[Any], Any], log: Callable[[Any], Any]
    ) -> Any:
        n = math.prod(z.shape)
        s = self.scale
        return -0.5 * (z * z).sum() / s**2 - n * math.log(s) - n * _HALF_LOG_2PI

    @classmethod
    def examples(cls) -> tuple[Normal, ...]:
        return (cls(1.0), cls(0.3))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "normal", "scale": self.scale}


@dataclass(frozen=True)
class Gamma:
    """Gamma prior with shape ``concentration`` and ``rate`` (mean concentration / rate)."""

    concentration: float
    rate: float
    positive = True
    learned = False

    def __post_init__(self) -> None:
        for name in ("concentration", "rate"):
            object.__setattr__(self, name, _positive_finite(f"Gamma {name}", getattr(self, name)))

    def distribution(self, ppl: PPL, shape: tuple[int, ...]) -> Any:
        return _event(ppl.dist.Gamma(self.concentration, self.rate), shape)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.gamma(self.concentration, 1.0 / self.rate, size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return np.log(value)

    def log_density_unconstrained(
        self, z: Any, exp: Callable[[Any], Any], log: Callable[[Any], Any]
    ) -> Any:
        # tau = exp(z): log Gamma(tau; a, b) + z  =  a log b - lgamma(a) + a z - b exp(z)
        a, b = self.concentration, self.rate
        n = math.prod(z.shape)
        return n * (a * math.log(b) - math.lgamma(a)) + (a * z - b * exp(z)).sum()

    @classmethod
    def examples(cls) -> tuple[Gamma, ...]:
        return (cls(6.0, 6.0), cls(2.0, 0.5))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "gamma", "concentration": self.concentration, "rate": self.rate}


def _probability(name: str, value: object) -> float:
    if not is_number(value):
        kind = type(value).__name__
        raise ValueError(f"{name} must be in (0, 1), got {value!r}: a {kind}, not a number")
    if not (0 < value < 1):
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return float(value)


#: The hyperparameters of :class:`ScaleMixture` and the constraint (a name in both libraries'
#: ``distributions.constraints``) their ``param`` sites carry when learned.
MIXTURE_HYPERPARAMETERS: dict[str, str] = {
    "pi": "unit_interval",
    "sigma1": "positive",
    "sigma2": "positive",
}


@dataclass(frozen=True)
class ScaleMixture:
    r"""Scale mixture of two zero-mean Normals (Blundell et al. 2015, sec. 3.3), elementwise:

    .. math::

        p(w) = \pi\,\mathcal N(w; 0, \sigma_1^2) + (1 - \pi)\,\mathcal N(w; 0, \sigma_2^2),

    variance :math:`\pi\sigma_1^2 + (1 - \pi)\sigma_2^2`. With :math:`\sigma_1 > \sigma_2` it has
    a heavy tail and a spike near zero. ``learned=True`` makes :math:`(\pi, \sigma_1, \sigma_2)`
    point estimates fitted with the ELBO (type-II maximum likelihood), starting at the given
    values and shared by every layer with this prior; only optimisation methods fit them.
    """

    pi: float = 0.2
    sigma1: float = 1.0
    sigma2: float = 0.1
    learned: bool = False
    positive = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "pi", _probability("ScaleMixture pi", self.pi))
        for name in ("sigma1", "sigma2"):
            value = _positive_finite(f"ScaleMixture {name}", getattr(self, name))
            object.__setattr__(self, name, value)
        if not isinstance(self.learned, bool):
            raise ValueError(f"ScaleMixture learned must be True or False, got {self.learned!r}")

    @property
    def hyperparameters(self) -> dict[str, tuple[float, str]]:
        """``{name: (initial value, constraint name)}`` of what is learned (empty when fixed)."""
        if not self.learned:
            return {}
        return {name: (getattr(self, name), c) for name, c in MIXTURE_HYPERPARAMETERS.items()}

    def distribution(
        self, ppl: PPL, shape: tuple[int, ...], values: dict[str, Any] | None = None
    ) -> Any:
        """The mixture over a site; ``values`` (``pi``, ``sigma1``, ``sigma2``, e.g. a model's
        ``param`` sites) replace the fixed ones."""
        v = {name: getattr(self, name) for name in MIXTURE_HYPERPARAMETERS}
        v.update(values or {})
        probs = ppl.stack([v["pi"], 1.0 - v["pi"]])
        scales = ppl.stack([v["sigma1"], v["sigma2"]])
        dist = ppl.dist
        mixture = dist.MixtureSameFamily(dist.Categorical(probs=probs), dist.Normal(0.0, scales))
        return _event(mixture, shape)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        scale = np.where(rng.random(size=shape) < self.pi, self.sigma1, self.sigma2)
        return scale * rng.standard_normal(size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return value

    def log_density_unconstrained(
        self, z: Any, exp: Callable[[Any], Any], log: Callable[[Any], Any]
    ) -> Any:
        # With (a, s) the wider component and (b, t) the other, factor the wider one out:
        # log p(z) = log(a / s) - log sqrt(2 pi) - z^2 / 2s^2
        #            + log(1 + (b s)/(a t) exp(-z^2 (1/t^2 - 1/s^2) / 2)),
        # whose exp(...) <= 1 cannot overflow: a log-sum-exp without a max.
        components = [(self.pi, self.sigma1), (1.0 - self.pi, self.sigma2)]
        (a, s), (b, t) = sorted(components, key=lambda c: -c[1])
        sq = z * z
        n = math.prod(z.shape)
        ratio = (b * s) / (a * t)
        rate = 0.5 * (1.0 / t**2 - 1.0 / s**2)
        head = n * (math.log(a / s) - _HALF_LOG_2PI) - 0.5 * sq.sum() / s**2
        return head + log(1.0 + ratio * exp(-rate * sq)).sum()

    @classmethod
    def examples(cls) -> tuple[ScaleMixture, ...]:
        return (cls(), cls(0.2, 1.0, 0.1), cls(learned=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "scale_mixture",
            "pi": self.pi,
            "sigma1": self.sigma1,
            "sigma2": self.sigma2,
            "learned": self.learned,
        }


@dataclass(frozen=True)
class HalfCauchy:
    r"""Half-Cauchy prior :math:`\lambda \sim \mathcal C^+(0, s)`, density
    :math:`2 / (\pi s (1 + \lambda^2 / s^2))` on :math:`(0, \infty)`, sampled as
    :math:`u = \log \lambda`: a scale's prior with a heavy tail (Gelman 2006), the horseshoe's."""

    scale: float = 1.0
    positive = True
    learned = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive_finite("HalfCauchy scale", self.scale))

    def distribution(self, ppl: PPL, shape: tuple[int, ...]) -> Any:
        return _event(ppl.dist.HalfCauchy(self.scale), shape)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return np.abs(self.scale * rng.standard_cauchy(size=shape))

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return np.log(value)

    def log_density_unconstrained(
        self, z: Any, exp: Callable[[Any], Any], log: Callable[[Any], Any]
    ) -> Any:
        # lambda = exp(z): log(2 / (pi s)) - log(1 + exp(2z) / s^2) + z; exp(2z) overflows
        # float32 only beyond lambda ~ 1e19.
        s = self.scale
        n = math.prod(z.shape)
        return n * math.log(2.0 / (math.pi * s)) + (z - log(1.0 + exp(2.0 * z) / s**2)).sum()

    @classmethod
    def examples(cls) -> tuple[HalfCauchy, ...]:
        return (cls(), cls(0.1))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "half_cauchy", "scale": self.scale}


@dataclass(frozen=True, eq=False)
class NormalGivenScale:
    r"""Zero-mean Normal with an array of stds :math:`s` broadcast against the site: the
    conditional prior a :class:`HierarchicalPrior` gives at its latent values.

    ``scale`` has shape ``batch + trailing``, ``trailing`` the last ``scale_ndim`` axes of the
    site's shape; ``batch`` (draws the program vectorises) leads. Not stored: the hierarchical
    prior that gave it is.
    """

    scale: Any
    scale_ndim: int
    positive = False
    learned = False

    def aligned(self, shape: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
        """``(scale, batch)``: the scale with axes inserted so that it broadcasts against a site
        of ``shape`` behind its batch axes."""
        s = self.scale
        cut = len(s.shape) - self.scale_ndim
        batch, trailing = tuple(s.shape[:cut]), tuple(s.shape[cut:])
        return s.reshape(batch + (1,) * (len(shape) - self.scale_ndim) + trailing), batch

    def distribution(self, ppl: PPL, shape: tuple[int, ...]) -> Any:
        s, batch = self.aligned(shape)
        normal = ppl.dist.Normal(0.0, s).expand(list(batch + tuple(shape)))
        return normal.to_event(len(shape)) if shape else normal

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return self.aligned(shape)[0] * rng.standard_normal(size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return value

    def log_density_unconstrained(
        self, z: Any, exp: Callable[[Any], Any], log: Callable[[Any], Any]
    ) -> Any:
        s = self.aligned(tuple(z.shape))[0]
        n = math.prod(z.shape)
        repeats = n / math.prod(s.shape)  # how often each std is broadcast over the site
        return -0.5 * (z * z / (s * s)).sum() - repeats * log(s).sum() - n * _HALF_LOG_2PI

    def to_dict(self) -> dict[str, Any]:
        raise TypeError("a conditional prior is not stored: store the hierarchical prior")


@dataclass(frozen=True)
class Horseshoe:
    r"""Node-wise horseshoe prior (Carvalho et al. 2010, "The horseshoe estimator for sparse
    signals"; on network units as in Ghosh, Yao & Doshi-Velez 2019, "Model Selection in
    Bayesian Neural Networks via Horseshoe Priors"), per site:

    .. math::

        w_{\dots j} \mid \tau, \lambda_j \sim \mathcal N(0, \tau^2 \lambda_j^2),\qquad
        \lambda_j \sim \mathcal C^+(0, b_\lambda),\qquad \tau \sim \mathcal C^+(0, b_\tau),

    with :math:`j` the output unit (the site's last axis), :math:`\tau` one scale for the site
    and :math:`b_\tau` = ``global_scale``, :math:`b_\lambda` = ``local_scale``. The scales are
    latent sites ``<site>_tau`` and ``<site>_lambda``, sampled with the weights (centred
    parametrisation). The joint density grows without bound as a unit's scale and its weights
    go to 0 together, so it has no mode: methods built on one refuse it.
    """

    global_scale: float = 1.0
    local_scale: float = 1.0
    positive = False
    learned = False

    def __post_init__(self) -> None:
        for name in ("global_scale", "local_scale"):
            value = _positive_finite(f"Horseshoe {name}", getattr(self, name))
            object.__setattr__(self, name, value)

    def latent_sites(self, shape: tuple[int, ...]) -> dict[str, tuple[tuple[int, ...], Prior]]:
        if not shape:
            raise ValueError("a horseshoe prior needs a site with a unit axis, not a scalar")
        return {
            "tau": ((), HalfCauchy(self.global_scale)),
            "lambda": (tuple(shape[-1:]), HalfCauchy(self.local_scale)),
        }

    def given(self, latent: Mapping[str, Any]) -> Prior:
        return NormalGivenScale(latent["tau"][..., None] * latent["lambda"], scale_ndim=1)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        latent = {k: p.sample(rng, s) for k, (s, p) in self.latent_sites(shape).items()}
        return self.given(latent).sample(rng, shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return value

    @classmethod
    def examples(cls) -> tuple[Horseshoe, ...]:
        return (cls(), cls(0.1, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "horseshoe",
            "global_scale": self.global_scale,
            "local_scale": self.local_scale,
        }


#: The noise-precision prior of probabilistic backpropagation (Hernández-Lobato & Adams 2015),
#: used on the UCI regression benchmark; it floors the noise (see :mod:`ppl_bnn.model.spec`).
PBP_NOISE_PRIOR = Gamma(6.0, 6.0)

#: Prior classes by the ``kind`` their :meth:`to_dict` writes. Each also gives ``examples()``, a
#: few instances that exercise it: the prior conformance tests run every class here with them
#: (a prior of one's own, passed to ``BNN``, needs only :class:`Prior`).
PRIORS: dict[str, type] = {
    "normal": Normal,
    "gamma": Gamma,
    "scale_mixture": ScaleMixture,
    "half_cauchy": HalfCauchy,
    "horseshoe": Horseshoe,
}


def prior_from_dict(data: dict[str, Any]) -> SitePrior:
    """The prior a ``to_dict`` wrote; an unknown kind raises ``ValueError`` listing the known."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind not in PRIORS:
        raise ValueError(f"unknown prior kind {kind!r}; known: {', '.join(PRIORS)}")
    try:
        return PRIORS[kind](**fields)
    except TypeError as err:  # an unknown or missing field
        raise ValueError(f"bad {kind!r} prior {data!r}: {err}") from err
