"""Pyro's global state, contained: torch's generator and Pyro's param store, per fit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyro
import torch


@contextlib.contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Run Pyro code with torch's generator seeded, restoring the caller's RNG state afterwards.

    Pyro's samplers and guides draw from torch's default generator and accept no other, so the
    seed is applied inside :func:`torch.random.fork_rng`: nothing leaks to the caller.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def pyro_scope() -> Iterator[None]:
    """A fresh Pyro param store for one fit; the caller's store is restored afterwards."""
    with pyro.get_param_store().scope():
        yield
