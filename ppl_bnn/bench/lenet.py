r"""LeNet-5 on MNIST-shaped images: the Bayesian network the conv probe times.

Its floor is a plain (non-Bayesian) LeNet-5 training step in each backend's framework: forward
pass, mean cross-entropy, backward pass and an Adam update (Kingma & Ba 2015,
:math:`m \leftarrow \beta_1 m + (1-\beta_1) g`, :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
:math:`\theta \leftarrow \theta - \eta\,\hat m / (\sqrt{\hat v} + \epsilon)`) on a minibatch
drawn from the training images, as each backend's ``perf`` module writes it
(:meth:`ppl_bnn.engine.perf.Perf.plain_step`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ppl_bnn.data import load_dataset
from ppl_bnn.data.errors import DatasetNotFoundError
from ppl_bnn.engine.perf import LENET_CHANNELS, LENET_DENSE
from ppl_bnn.model.layers import Conv2d, Dense, Flatten, Layer, MaxPool2d
from ppl_bnn.model.priors import Normal, Prior, ScaleMixture

logger = logging.getLogger(__name__)

#: The images of one MNIST epoch (its training split).
MNIST_TRAIN = 60_000

#: The priors of the Bayesian LeNet-5, by name: Blundell et al.'s (2015) scale mixture
#: (pi = 0.2, sigma1 = 1, sigma2 = 0.1) or a standard Normal.
PRIORS: dict[str, Prior] = {"scale_mixture": ScaleMixture(0.2, 1.0, 0.1), "normal": Normal(1.0)}


def lenet5() -> list[Layer]:
    """LeNet-5: conv 6@5x5 'same' relu, max-pool 2, conv 16@5x5 'same' relu, max-pool 2,
    conv 120@5x5 'same' relu, flatten, dense 84 relu, dense 10 (the plain steps' layers,
    :data:`~ppl_bnn.engine.perf.LENET_CHANNELS` and :data:`~ppl_bnn.engine.perf.LENET_DENSE`)."""
    (c1, c2, c3), (hidden, classes) = LENET_CHANNELS, LENET_DENSE
    return [
        Conv2d(c1, 5, padding="same", activation="relu"),
        MaxPool2d(2),
        Conv2d(c2, 5, padding="same", activation="relu"),
        MaxPool2d(2),
        Conv2d(c3, 5, padding="same", activation="relu"),
        Flatten(),
        Dense(hidden, activation="relu"),
        Dense(classes),
    ]


def own_steps_seconds(result: Any) -> float:
    """Seconds a fit spent on its own optimisation steps: its warmup less the MAP warm start's
    (``info["init_map_seconds"]``, where ``init_loc="map"``)."""
    return result.timings["warmup"] - result.info.get("init_map_seconds", 0.0)


def mnist_images(
    n: int, data_dir: str | None = None, seed: int = 0, size: int = 28
) -> tuple[np.ndarray, np.ndarray, str]:
    """``(x, y, source)``: ``n`` MNIST training images (n, 28, 28, 1) and labels when the data
    directory has MNIST (``source = "mnist"``), else ``n`` standard-normal images of the same
    shape with uniform labels (``source = "synthetic"``), so that the probe runs offline.
    Another ``size`` (a multiple of 4, for the two pools) always gives synthetic images."""
    for name, value in (("n", n), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if size % 4:
        raise ValueError(f"size must be a multiple of 4 (LeNet-5 pools twice), got {size}")
    if size == 28:
        try:
            data = load_dataset("mnist", data_dir=data_dir, max_train=n, seed=seed, image=True)
            return data.x_train.astype(np.float32), data.y_train.astype(np.int64), "mnist"
        except DatasetNotFoundError:
            logger.info("MNIST not found; timing LeNet-5 on synthetic 28x28x1 images")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, size, size, 1)).astype(np.float32)
    return x, rng.integers(0, 10, size=n), "synthetic"
