"""Explicit randomness: one integer seed in, named child seeds out.

Every consumer of randomness (prior draws, the inference algorithm, draws from a fitted guide)
gets its own stream from :class:`numpy.random.SeedSequence`, keyed by a purpose string, so adding a
consumer never shifts another's stream. Nothing here touches a global RNG.
"""

from __future__ import annotations

import hashlib

import numpy as np

#: The largest seed: a saved fit stores its seed as an unsigned 64-bit integer (netCDF/HDF5
#: have no wider one), while :class:`numpy.random.SeedSequence` would take any non-negative int.
MAX_SEED = 2**64 - 1


def check_seed(seed: object) -> int:
    """``seed`` as an int from 0 to :data:`MAX_SEED`; ``ValueError`` otherwise."""
    if (
        isinstance(seed, bool)
        or not isinstance(seed, int | np.integer)
        or not 0 <= seed <= MAX_SEED
    ):
        raise ValueError(
            f"seed must be a non-negative integer below 2**64 (0 to {MAX_SEED}, what a saved "
            f"fit can store), got {seed!r}"
        )
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
