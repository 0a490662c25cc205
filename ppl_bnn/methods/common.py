"""What every method runner returns, and checks its options share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RunOutput:
    """Raw output of a runner, before ``fit`` adds the pointwise log-likelihood.

    Attributes:
        draws: Site -> array shaped (chain, draw, *site_shape), constrained space.
        sample_stats: Stat -> array shaped (chain, draw) (samplers only).
        timings: Seconds: ``compile``, ``warmup`` (MCMC warmup / SVI optimisation), ``sampling``.
        losses: SVI loss (negative ELBO estimate) per step.
        variational: SVI guide parameters (unconstrained): ``{"loc": {...}, "scale": {...}}``.
        info: Anything else worth recording (chain method, Pyro jit mode, threads, divergence).
    """

    draws: dict[str, np.ndarray]
    timings: dict[str, float]
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    losses: np.ndarray | None = None
    variational: dict[str, dict[str, np.ndarray]] | None = None
    info: dict[str, Any] = field(default_factory=dict)


def check_positive_int(name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_positive_float(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.integer | np.floating)
        or not (0 < value < float("inf"))
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_probability(name: str, value: object) -> None:
    check_positive_float(name, value)
    if not value < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")


@contextlib.contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Run Pyro code with torch's generator seeded, restoring the caller's RNG state afterwards.

    Pyro's samplers and guides draw from torch's default generator and accept no other, so the
    seed is applied inside :func:`torch.random.fork_rng`: nothing leaks to the caller.
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def pyro_scope() -> Iterator[None]:
    """A fresh Pyro param store for one fit; the caller's store is restored afterwards."""
    import pyro

    with pyro.get_param_store().scope():
        yield


class DivergedError(RuntimeError):
    """A method produced non-finite values before it could return any usable draw."""


def check_batch_size(batch_size: int, num_data: int) -> int:
    """``batch_size`` if it fits the data; ``ValueError`` otherwise."""
    if batch_size > num_data:
        raise ValueError(f"batch_size {batch_size} exceeds the {num_data} training points")
    return batch_size


class HessianError(RuntimeError):
    """The Hessian of the negative log joint at the optimum is not positive definite."""
