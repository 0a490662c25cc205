"""Explicit randomness: one integer seed in, named child seeds out.

Every consumer of randomness (prior draws, the inference algorithm, draws from a fitted guide)
gets its own stream from :class:`numpy.random.SeedSequence`, keyed by a purpose string, so adding a
consumer never shifts another's stream. Nothing here touches a global RNG.
"""

from __future__ import annotations

import hashlib

import numpy as np


def check_seed(seed: object) -> int:
    """``seed`` as a non-negative int; ``ValueError`` otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _sequence(seed: int, purpose: str) -> np.random.SeedSequence:
    key = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:8], "little")
    return np.random.SeedSequence(check_seed(seed), spawn_key=(key,))


def child_seed(seed: int, purpose: str) -> int:
    """A 32-bit seed for ``purpose``, derived from ``seed``."""
    return int(_sequence(seed, purpose).generate_state(1)[0])


def numpy_generator(seed: int, purpose: str) -> np.random.Generator:
    """A numpy ``Generator`` for ``purpose``, derived from ``seed``."""
    return np.random.default_rng(_sequence(seed, purpose))
