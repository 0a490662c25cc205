r"""LeNet-5 on MNIST-shaped images: the Bayesian network the conv probe times, and its floor.

The floor is a plain (non-Bayesian) LeNet-5 training step in each framework: forward pass,
mean cross-entropy, backward pass and an Adam update (Kingma & Ba 2015,
:math:`m \leftarrow \beta_1 m + (1-\beta_1) g`, :math:`v \leftarrow \beta_2 v + (1-\beta_2) g^2`,
:math:`\theta \leftarrow \theta - \eta\,\hat m / (\sqrt{\hat v} + \epsilon)`) on a minibatch
drawn from the training images:

- JAX: one jitted step (hand-written Adam) called once per step, as the NumPyro drivers step a
  network with convolutions on the CPU (:func:`ppl_bnn.backends.numpyro.steps.steps_in_loop`:
  XLA:CPU runs convolutions far slower inside a compiled loop);
- torch: ``torch.nn`` modules and ``torch.optim.Adam`` stepped from a Python loop, as the Pyro
  driver runs.

Every timing function returns a runner, which times ``steps`` steps and returns the seconds per
step, and the first call's seconds (JAX's compilation, torch's first step) timed apart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from ppl_bnn.data import load_dataset
from ppl_bnn.data.errors import DatasetNotFoundError
from ppl_bnn.model.layers import Conv2d, Dense, Flatten, Layer, MaxPool2d
from ppl_bnn.model.priors import Normal, Prior, ScaleMixture
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: The images of one MNIST epoch (its training split).
MNIST_TRAIN = 60_000

#: The priors of the Bayesian LeNet-5, by name: Blundell et al.'s (2015) scale mixture
#: (pi = 0.2, sigma1 = 1, sigma2 = 0.1) or a standard Normal.
PRIORS: dict[str, Prior] = {"scale_mixture": ScaleMixture(0.2, 1.0, 0.1), "normal": Normal(1.0)}


def lenet5() -> list[Layer]:
    """LeNet-5: conv 6@5x5 'same' relu, max-pool 2, conv 16@5x5 'same' relu, max-pool 2,
    conv 120@5x5 'same' relu, flatten, dense 84 relu, dense 10."""
    return [
        Conv2d(6, 5, padding="same", activation="relu"),
        MaxPool2d(2),
        Conv2d(16, 5, padding="same", activation="relu"),
        MaxPool2d(2),
        Conv2d(120, 5, padding="same", activation="relu"),
        Flatten(),
        Dense(84, activation="relu"),
        Dense(10),
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


def _batches(n: int, batch_size: int, steps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(steps, batch_size))


def jax_plain_step(
    x: np.ndarray, y: np.ndarray, *, batch_size: int, steps: int, lr: float = 1e-3
) -> tuple[Callable[[], float], float]:
    """``(run, compile seconds)`` of plain LeNet-5 training in JAX: ``run()`` trains ``steps``
    steps from the same start and returns the seconds per step."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    def conv(h, w, b):
        dims = ("NHWC", "HWIO", "NHWC")
        out = lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=dims)
        return jax.nn.relu(out + b)

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def logits(p, h):
        h = pool(conv(h, p["c1"], p["b1"]))
        h = pool(conv(h, p["c2"], p["b2"]))
        h = conv(h, p["c3"], p["b3"]).reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ p["d1"] + p["e1"])
        return h @ p["d2"] + p["e2"]

    def loss(p, xb, yb):
        log_p = jax.nn.log_softmax(logits(p, xb))
        return -jnp.take_along_axis(log_p, yb[:, None], axis=1).mean()

    rng = np.random.default_rng(0)
    flat = (x.shape[1] // 4) * (x.shape[2] // 4) * 120
    shapes = {
        "c1": (5, 5, 1, 6), "b1": (6,), "c2": (5, 5, 6, 16), "b2": (16,),
        "c3": (5, 5, 16, 120), "b3": (120,), "d1": (flat, 84), "e1": (84,),
        "d2": (84, 10), "e2": (10,),
    }  # fmt: skip
    params = {k: jnp.asarray(0.05 * rng.standard_normal(s), jnp.float32) for k, s in shapes.items()}
    xs, ys = jnp.asarray(x), jnp.asarray(y, jnp.int32)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def step(carry, inputs):
        p, m, v = carry
        i, idx = inputs
        g = jax.grad(loss)(p, xs[idx], ys[idx])
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        t = i + 1.0
        p = jax.tree.map(
            lambda p, m, v: p - lr * (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + eps), p, m, v
        )
        return (p, m, v), None

    zeros = jax.tree.map(jnp.zeros_like, params)
    schedule = jnp.asarray(_batches(len(x), batch_size, steps, seed=1))
    carry = (params, zeros, zeros)
    start = now()
    compiled = jax.jit(step).lower(carry, (jnp.float32(0), schedule[0])).compile()
    compile_s = now() - start

    def run() -> float:
        state = carry
        start = now()
        for i in range(steps):
            state, _ = compiled(state, (jnp.float32(i), schedule[i]))
        jax.block_until_ready(state)
        return (now() - start) / steps

    return run, compile_s


def torch_plain_step(
    x: np.ndarray, y: np.ndarray, *, batch_size: int, steps: int, lr: float = 1e-3
) -> tuple[Callable[[], float], float]:
    """``(run, first step's seconds)`` of plain LeNet-5 training in torch (eager ``torch.nn``
    modules, ``torch.optim.Adam``): ``run()`` trains ``steps`` more steps and returns the
    seconds per step."""
    import torch
    from torch import nn

    from ppl_bnn.backends.pyro.rng import seeded_torch

    with seeded_torch(0):  # seeded initial weights; the caller's RNG state is restored
        net = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 120, 5, padding="same"), nn.ReLU(), nn.Flatten(),
            nn.Linear((x.shape[1] // 4) * (x.shape[2] // 4) * 120, 84), nn.ReLU(),
            nn.Linear(84, 10),
        )  # fmt: skip
    adam = torch.optim.Adam(net.parameters(), lr=lr)
    images = torch.as_tensor(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    labels = torch.as_tensor(np.asarray(y, dtype=np.int64))
    schedule = torch.as_tensor(_batches(len(x), batch_size, steps + 1, seed=1))

    def step(i: int) -> None:
        idx = schedule[i]
        loss = nn.functional.cross_entropy(net(images[idx]), labels[idx])
        adam.zero_grad(set_to_none=True)
        loss.backward()
        adam.step()

    start = now()
    step(steps)
    first = now() - start

    def run() -> float:
        start = now()
        for i in range(steps):
            step(i)
        return (now() - start) / steps

    return run, first


def plain_step(
    backend: str, x: np.ndarray, y: np.ndarray, **kwargs: Any
) -> tuple[Callable[[], float], float]:
    """:func:`jax_plain_step` for ``"numpyro"``, :func:`torch_plain_step` for ``"pyro"``."""
    if backend == "numpyro":
        return jax_plain_step(x, y, **kwargs)
    if backend == "pyro":
        return torch_plain_step(x, y, **kwargs)
    raise ValueError(f"unknown backend {backend!r}; allowed: numpyro, pyro")
