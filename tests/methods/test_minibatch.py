"""Minibatch schedules: random reshuffling, disjoint within an epoch, every point equally often."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn.methods.minibatch import batch_schedule


def test_schedule_shape_and_range():
    schedule = batch_schedule(41, 8, 23, np.random.default_rng(0))
    assert schedule.shape == (23, 8) and schedule.dtype == np.int32
    assert schedule.min() >= 0 and schedule.max() < 41


def test_batches_of_one_epoch_are_disjoint_and_epochs_reshuffle():
    n, batch = 20, 6  # 3 batches per epoch; 2 points sit each epoch out
    schedule = batch_schedule(n, batch, 9, np.random.default_rng(1))
    epochs = schedule.reshape(3, 3 * batch)
    for epoch in epochs:
        assert len(np.unique(epoch)) == 3 * batch
    assert not np.array_equal(epochs[0], epochs[1])


def test_every_point_is_drawn_equally_often():
    """Each point is in a step's batch with probability B/N; over 1000 epochs of 3 batches of 3
    out of 10 points, a point's count is 1000 Bernoulli(0.9) draws: mean 900, sd 9.5."""
    schedule = batch_schedule(10, 3, 3000, np.random.default_rng(2))
    counts = np.bincount(schedule.ravel(), minlength=10)
    assert np.all(np.abs(counts - 900) < 5 * np.sqrt(1000 * 0.9 * 0.1))


def test_the_same_seed_gives_the_same_schedule():
    first = batch_schedule(50, 7, 40, np.random.default_rng(3))
    again = batch_schedule(50, 7, 40, np.random.default_rng(3))
    np.testing.assert_array_equal(first, again)


def test_batch_larger_than_the_data_is_refused():
    with pytest.raises(ValueError, match="batch_size 11 exceeds the 10 training points"):
        batch_schedule(10, 11, 5, np.random.default_rng(0))
