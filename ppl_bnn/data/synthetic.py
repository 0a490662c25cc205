"""Synthetic 1-D regression sets that need no data directory: ``sine`` and ``gap``.

Split ``k`` of each is drawn from :func:`ppl_bnn.data.prepare.split_generator` ``(name, k)``,
i.e. ``default_rng(SeedSequence(k, spawn_key=(crc32(name), crc32("data"))))``: the same split
gives the same points on every machine and numpy version with the same ``Generator`` streams.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ppl_bnn.data.prepare import RawData, split_generator

SINE_N_TRAIN = 32
SINE_TRAIN_HALF_WIDTH = 0.5
SINE_N_TEST = 200
SINE_GRID = (-1.5, 1.5, 300)

GAP_CLUSTERS = ((-1.0, -0.7), (0.5, 1.0))
GAP_N_PER_CLUSTER = 50
GAP_NOISE_STD = 0.1
GAP_N_TEST = 200
GAP_TEST_RANGE = (-1.0, 1.0)
GAP_GRID = (-2.0, 2.0, 300)


def sine_function(x: np.ndarray) -> np.ndarray:
    """The noise-free sine set's mean: ``10 sin(2 pi x)``."""
    return 10.0 * np.sin(2.0 * np.pi * x)


def gap_function(x: np.ndarray) -> np.ndarray:
    """The noise-free gap set's mean: ``cos(4 x + 0.8)``."""
    return np.cos(4.0 * x + 0.8)


#: Each synthetic set's noise-free mean (the truth its targets scatter around) and its formula.
TRUE_MEANS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "sine": (sine_function, "10 sin(2πx)"),
    "gap": (gap_function, "cos(4x + 0.8)"),
}


def sine(split: int) -> RawData:
    """Small 1-D regression set with an out-of-range test set.

    Training: 32 points, ``x ~ U[-0.5, 0.5]``, ``y = 10 sin(2 pi x) + eps``, ``eps ~ N(0, 1)``.
    Test: 200 points drawn the same way but with ``x ~ U[-1.5, 1.5]``, so two thirds of them lie
    outside the training range and measure extrapolation; ``test_inside`` marks the third inside
    [-0.5, 0.5] ("in range", the rest "out of range"). ``x_grid``: 300 points evenly spaced on
    [-1.5, 1.5]. Draw order: train x, train noise, test x, test noise.
    """
    rng = split_generator("sine", split)
    x_train = rng.uniform(-SINE_TRAIN_HALF_WIDTH, SINE_TRAIN_HALF_WIDTH, size=SINE_N_TRAIN)
    y_train = sine_function(x_train) + rng.normal(size=SINE_N_TRAIN)
    x_test = rng.uniform(SINE_GRID[0], SINE_GRID[1], size=SINE_N_TEST)
    y_test = sine_function(x_test) + rng.normal(size=SINE_N_TEST)
    return RawData(
        task="regression",
        x_train=x_train[:, None],
        y_train=y_train,
        x_test=x_test[:, None],
        y_test=y_test,
        x_grid=np.linspace(*SINE_GRID)[:, None],
        source=(
            "synthetic: 32 points, x ~ U[-0.5, 0.5], y = 10 sin(2 pi x) + N(0, 1); "
            "test x ~ U[-1.5, 1.5]"
        ),
        test_inside=np.abs(x_test) <= SINE_TRAIN_HALF_WIDTH,
        regions=("in range", "out of range"),
    )


def gap(split: int) -> RawData:
    """1-D "in-between" regression set: two clusters of inputs with a gap between them.

    After Foong, Li, Hernandez-Lobato & Turner (2019), "'In-Between' Uncertainty in Bayesian
    Neural Networks", arXiv:1906.11537, which shows mean-field VI is over-confident between
    separated clusters of data. Construction (the one used for this set under the name
    "in-between dataset" by public code that follows the paper; its exact appendix text could not
    be checked here, so treat it as following the paper's setup in shape):

    - training: 100 points, 50 with ``x ~ U[-1, -0.7]`` and 50 with ``x ~ U[0.5, 1]``;
      ``y = cos(4 x + 0.8) + eps``, ``eps ~ N(0, 0.1^2)``;
    - test: 200 points drawn the same way with ``x ~ U[-1, 1]`` (both clusters and the gap;
      ``test_inside`` marks those in the clusters, the rest are "in the gap");
    - ``x_grid``: 300 points evenly spaced on [-2, 2].

    Draw order: cluster-1 x, cluster-2 x, train noise, test x, test noise.
    """
    rng = split_generator("gap", split)
    x_train = np.concatenate(
        [rng.uniform(lo, hi, size=GAP_N_PER_CLUSTER) for lo, hi in GAP_CLUSTERS]
    )
    y_train = gap_function(x_train) + GAP_NOISE_STD * rng.normal(size=x_train.size)
    x_test = rng.uniform(*GAP_TEST_RANGE, size=GAP_N_TEST)
    y_test = gap_function(x_test) + GAP_NOISE_STD * rng.normal(size=GAP_N_TEST)
    return RawData(
        task="regression",
        x_train=x_train[:, None],
        y_train=y_train,
        x_test=x_test[:, None],
        y_test=y_test,
        x_grid=np.linspace(*GAP_GRID)[:, None],
        test_inside=np.any([(lo <= x_test) & (x_test <= hi) for lo, hi in GAP_CLUSTERS], axis=0),
        regions=("in the clusters", "in the gap"),
        source=(
            "synthetic 'in-between' set after Foong et al. 2019 (arXiv:1906.11537): "
            "x ~ U[-1, -0.7] and U[0.5, 1] (50 each), y = cos(4x + 0.8) + N(0, 0.1^2)"
        ),
    )
