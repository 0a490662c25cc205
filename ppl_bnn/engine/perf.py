"""What a backend's ``perf`` module gives the performance suite (:mod:`ppl_bnn.bench.probes`,
:mod:`ppl_bnn.report.perf`): its floors, measured in its own framework with nothing around them,
the plain network step its Bayesian step is compared with, and how its report names its paths.

A backend without a ``perf`` module is fitted and timed through ``fit`` like any other, with no
floor beside it. Every timing function returns seconds per call, one number per repeat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from ppl_bnn.model.bnn import BNN

#: LeNet-5's layers (LeCun et al. 1998) as the plain steps build them: three 5x5 'same'
#: convolutions with ReLU (the first two each followed by a 2x2 max-pool), then dense layers of
#: 84 ReLU units and 10 logits.
LENET_CHANNELS: tuple[int, int, int] = (6, 16, 120)
LENET_DENSE: tuple[int, int] = (84, 10)


class Perf(Protocol):
    """A backend's ``perf`` module."""

    #: The bare gradients :meth:`gradient_costs` can time, with what the report calls each.
    GRADIENT_VARIANTS: Mapping[str, str]
    #: Those the scaling probe times by default (the rest only show what the floor probe does).
    SCALING_VARIANTS: tuple[str, ...]
    #: Gradient calls per repeat by default.
    DEFAULT_CALLS: int
    #: Whether its compiled programs persist across processes (the compile-cache probe).
    PERSISTENT_CACHE: bool
    #: The methods :meth:`direct_calls` calls (none: no overhead probe).
    DIRECT_METHODS: tuple[str, ...]
    #: Per method run on several paths (``fit`` options): the path the others are compared
    #: with; a method not named runs one path, ``"default"``.
    REFERENCE_PATHS: Mapping[str, str]
    #: Per method, what the report calls each path.
    PATHS: Mapping[str, Mapping[str, str]]
    #: The goal of a (method, path)'s speed-up over its reference path, where there is one.
    GOALS: Mapping[tuple[str, str], str]

    def gradient_costs(
        self, model: BNN, *, calls: int, repeats: int, variants: tuple[str, ...]
    ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        """Seconds per gradient of the model's potential for each of ``variants``, and the
        compile seconds of those that compile ahead of their calls."""

    def kernel_costs(self, size: int, *, draws: int, repeats: int) -> dict[str, list[float]]:
        """Seconds per leapfrog step of its samplers' kernels (by kernel name) on a nearly free
        potential in ``size`` dimensions; empty where the kernel is compiled with the potential
        (its cost is then part of the sampler against the bare gradient)."""

    def direct_calls(self, model: BNN, nuts: Any, svi: Any) -> dict[str, Callable[[], None]]:
        """The PPL's own :data:`DIRECT_METHODS` called directly (by method name), with
        ``fit``'s model, keys and settings (``nuts`` and ``svi``: their options dataclasses), to
        time ``fit``'s overhead against."""

    def plain_step(
        self, x: np.ndarray, y: np.ndarray, *, batch_size: int, steps: int
    ) -> tuple[Callable[[], float], float]:
        """``(run, first call's seconds)`` of plain LeNet-5 training (forward, mean
        cross-entropy, backward, Adam) on minibatches of images ``x`` (N, H, W, 1) and labels
        ``y``: ``run()`` trains ``steps`` steps and returns the seconds per step."""

    def parallelism(self) -> str:
        """How its predictions run in parallel here (devices, threads)."""


def start_point(size: int, seed: int = 0) -> np.ndarray:
    """Where the floors evaluate the potential: U(-0.5, 0.5) on the unconstrained scale."""
    return np.random.default_rng(seed).uniform(-0.5, 0.5, size).astype(np.float32)


def plain_step_batches(n: int, batch_size: int, steps: int, seed: int = 1) -> np.ndarray:
    """The minibatches (steps, batch_size) of a plain step's training, drawn with replacement."""
    return np.random.default_rng(seed).integers(0, n, size=(steps, batch_size))
