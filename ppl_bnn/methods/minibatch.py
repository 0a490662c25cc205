r"""Minibatch indices, drawn up front and shared by both backends.

Random reshuffling: every epoch, one permutation of the :math:`N` training points is cut into
:math:`\lfloor N/B \rfloor` disjoint batches of :math:`B` (the :math:`N \bmod B` points left over
sit that epoch out; the next epoch reshuffles). Each batch is a uniformly random subset of size
:math:`B`, so :math:`\frac{N}{B}\sum_{i \in \text{batch}} \nabla \log p(y_i \mid x_i, \theta)` is an
unbiased estimate of the full-data gradient, as with a fresh subset at every step (Robbins &
Monro 1951; Welling & Teh 2011); batches within one epoch never overlap.

The schedule costs one permutation of :math:`N` per epoch, drawn with numpy before the loop, where
a subset without replacement drawn at every step inside a compiled JAX loop costs a sort of
:math:`N` keys per step, which dominates a step on a large training set. Both backends read the
same schedule for the same seed, so they see the same batches.
"""

from __future__ import annotations

import numpy as np

from ppl_bnn.methods.checks import check_batch_size


def batch_schedule(
    num_data: int, batch_size: int, num_steps: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices of each step's minibatch, shaped (num_steps, batch_size), int32."""
    check_batch_size(batch_size, num_data)
    per_epoch = num_data // batch_size
    epochs = -(-num_steps // per_epoch)
    batches = [
        rng.permutation(num_data)[: per_epoch * batch_size].reshape(per_epoch, batch_size)
        for _ in range(epochs)
    ]
    if not batches:
        return np.zeros((0, batch_size), dtype=np.int32)
    return np.concatenate(batches)[:num_steps].astype(np.int32)
