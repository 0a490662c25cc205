"""Pyro's global state, contained: torch's generator and Pyro's param store, per fit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pyro
import torch


@contextlib.contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Run torch code (Pyro's) with torch's default generator in the state of an explicit
    generator seeded by ``seed``, restoring the caller's RNG state afterwards.

    Pyro's samplers and guides draw from torch's default generator and accept no other, so the
    state of ``torch.Generator().manual_seed(seed)`` is installed there inside
    :func:`torch.random.fork_rng`, for the block only: nothing leaks to the caller. On a CUDA
    default device (:mod:`ppl_bnn.devices`) that device's generator is forked and seeded too,
    as Pyro's draws are made there.
    """
    device = torch.get_default_device()
    on_cuda = device.type == "cuda"
    forked = [device.index or 0] if on_cuda else []
    with torch.random.fork_rng(devices=forked):
        torch.set_rng_state(torch.Generator().manual_seed(seed).get_state())
        if on_cuda:
            torch.cuda.manual_seed(seed)
        yield


@contextlib.contextmanager
def pyro_scope() -> Iterator[None]:
    """A fresh Pyro param store for one fit; the caller's store is restored afterwards."""
    with pyro.get_param_store().scope():
        yield
