r"""Priors as small objects: each knows its distribution in a PPL, its support and an initial draw.

A prior is written once and used everywhere a site's prior matters: the model program (through
:meth:`distribution`, with the PPL's own distributions module), initial values (:meth:`sample`),
the unconstrained parametrisation samplers move in (:attr:`positive`, :meth:`unconstrain`) and a
framework-free log density on that parametrisation (:meth:`log_density_unconstrained`).

- :class:`Normal`: :math:`w \sim \mathcal N(0, s^2)` elementwise, on the real line.
- :class:`Gamma`: :math:`\tau \sim \text{Gamma}(a, b)` (shape :math:`a`, rate :math:`b`), on
  :math:`(0, \infty)`, sampled as :math:`u = \log \tau`.

A new prior is one class here satisfying :class:`Prior`.

This module imports neither torch nor jax.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ppl_bnn.model.scalars import is_number

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@runtime_checkable
class Prior(Protocol):
    """What the model program, initialisation and samplers need of a prior."""

    #: Whether the support is (0, inf) (unconstrained by ``log``) rather than the real line.
    positive: bool

    def distribution(self, dist: ModuleType, shape: tuple[int, ...]) -> Any:
        """The prior of a site of ``shape`` built from a PPL's distributions module."""

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """One draw of a site of ``shape`` (float64 numpy)."""

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        """``value`` mapped to the unconstrained space samplers move in."""

    def log_density_unconstrained(self, z: Any, exp: Callable[[Any], Any]) -> Any:
        """:math:`\\log p(T(z)) + \\log|\\det J_T(z)|` summed over a site, with array arithmetic
        (``exp`` is the framework's exponential)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :func:`prior_from_dict` reads it back."""


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


@dataclass(frozen=True)
class Normal:
    """Zero-mean Normal prior with standard deviation ``scale``."""

    scale: float
    positive = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive_finite("Normal scale", self.scale))

    def distribution(self, dist: ModuleType, shape: tuple[int, ...]) -> Any:
        return _event(dist.Normal(0.0, self.scale), shape)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.normal(0.0, self.scale, size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return value

    def log_density_unconstrained(self, z: Any, exp: Callable[[Any], Any]) -> Any:
        n = math.prod(z.shape)
        s = self.scale
        return -0.5 * (z * z).sum() / s**2 - n * math.log(s) - n * _HALF_LOG_2PI

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "normal", "scale": self.scale}


@dataclass(frozen=True)
class Gamma:
    """Gamma prior with shape ``concentration`` and ``rate`` (mean concentration / rate)."""

    concentration: float
    rate: float
    positive = True

    def __post_init__(self) -> None:
        for name in ("concentration", "rate"):
            object.__setattr__(self, name, _positive_finite(f"Gamma {name}", getattr(self, name)))

    def distribution(self, dist: ModuleType, shape: tuple[int, ...]) -> Any:
        return _event(dist.Gamma(self.concentration, self.rate), shape)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return rng.gamma(self.concentration, 1.0 / self.rate, size=shape)

    def unconstrain(self, value: np.ndarray) -> np.ndarray:
        return np.log(value)

    def log_density_unconstrained(self, z: Any, exp: Callable[[Any], Any]) -> Any:
        # tau = exp(z): log Gamma(tau; a, b) + z  =  a log b - lgamma(a) + a z - b exp(z)
        a, b = self.concentration, self.rate
        n = math.prod(z.shape)
        return n * (a * math.log(b) - math.lgamma(a)) + (a * z - b * exp(z)).sum()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "gamma", "concentration": self.concentration, "rate": self.rate}


#: The noise-precision prior of probabilistic backpropagation (Hernández-Lobato & Adams 2015),
#: used on the UCI regression benchmark; it floors the noise (see :mod:`ppl_bnn.model.spec`).
PBP_NOISE_PRIOR = Gamma(6.0, 6.0)

#: Prior classes by the ``kind`` their :meth:`to_dict` writes.
PRIORS: dict[str, type] = {"normal": Normal, "gamma": Gamma}


def prior_from_dict(data: dict[str, Any]) -> Prior:
    """The prior a ``to_dict`` wrote; an unknown kind raises ``ValueError`` listing the known."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    if kind not in PRIORS:
        raise ValueError(f"unknown prior kind {kind!r}; known: {', '.join(PRIORS)}")
    return PRIORS[kind](**fields)
