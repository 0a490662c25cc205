r"""SWAG, stochastic weight averaging Gaussian (``swag``; Maddox et al. 2019), and MultiSWAG
(``multiswag``; Wilson & Izmailov 2020), an ensemble of independent SWAG fits.

From the mode of a ``map`` fit, SGD with a constant learning rate :math:`\eta` on minibatches
moves the unconstrained parameters :math:`z` of the network's weights and biases,

.. math:: z_{t+1} = z_t + \frac{\eta\, \hat\sigma^2}{N} \nabla_z \log \tilde p(z_t),

(:math:`\log \tilde p` the minibatch log joint of :mod:`ppl_bnn.methods.sgmcmc`), so that
:math:`\eta` is the learning rate on the mean per-example loss: half the squared error for a
Gaussian likelihood of noise std :math:`\hat\sigma` (plus the prior's weight decay), the cross
entropy for a categorical one (:math:`\hat\sigma = 1`). A learned noise stays at the mode's
:math:`\hat\sigma` through the SGD phase and in every draw, as Maddox et al. fit the Gaussian
to the network's parameters only. Both choices make the default :math:`\eta` hold whatever the
noise: on the log joint's scale the step grows with the precision :math:`\hat\sigma^{-2}`, which
a MAP fit drives high, and SGD moving the log precision itself diverged within a few steps on
standardised UCI sets. Every ``collect_every`` steps (by default one epoch) SGD takes a snapshot
:math:`z_i`. From the :math:`n` snapshots, with the running mean :math:`\bar z_i` after
snapshot :math:`i` (Maddox et al. 2019, Algorithm 1):

.. math::

    \bar z = \frac1n \sum_i z_i, \qquad
    \Sigma_{\mathrm{diag}} = \mathrm{diag}\Big(\frac1n \sum_i z_i^2 - \bar z^2\Big), \qquad
    \hat D = [z_i - \bar z_i]_{i = n-K+1, \dots, n},

and each draw is

.. math:: \tilde z = \bar z + \tfrac{1}{\sqrt 2}\, \Sigma_{\mathrm{diag}}^{1/2} \xi_1
          + \tfrac{1}{\sqrt{2 (K - 1)}}\, \hat D\, \xi_2, \qquad
          \xi_1 \sim \mathcal N(0, I_d),\ \xi_2 \sim \mathcal N(0, I_K),

mapped back to the constrained space (``exp`` for positive sites). The SGD phase is a kernel of
the SG-MCMC drivers (the noise-free update :func:`sgd`, started at the mode), so it runs the
same on both backends; the Gaussian is fitted and sampled in numpy.

References: W. J. Maddox, T. Garipov, P. Izmailov, D. Vetrov, A. G. Wilson. A Simple Baseline
for Bayesian Uncertainty in Deep Learning. NeurIPS 2019. A. G. Wilson, P. Izmailov. Bayesian
Deep Learning and a Probabilistic Perspective of Generalization. NeurIPS 2020.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import get_driver
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.base import DivergedError, Family, Method, RunOutput
from ppl_bnn.methods.checks import check_batch_size, check_positive_float, check_positive_int
from ppl_bnn.methods.divergence import diverged
from ppl_bnn.methods.sgmcmc import DEFAULT_BATCH_SIZE, SGMCMCInfo, SGMCMCOptions
from ppl_bnn.model.bnn import BNN
from ppl_bnn.model.flat import FlatLayout
from ppl_bnn.model.spec import PRECISION_SITE
from ppl_bnn.seeding import child_seed, numpy_generator

#: Without ``swag_batch_size``: this many minibatches per epoch at least (up to 128 points each).
MIN_BATCHES_PER_EPOCH = 4


@dataclass(frozen=True, kw_only=True)
class SWAGOptions(map_estimate.MAPOptions):
    """Options of ``fit(..., method="swag")``: the ``map`` options for the starting mode, then
    the SGD phase and the Gaussian.

    Attributes:
        swag_learning_rate: :math:`\\eta`, SGD's constant learning rate on the mean
            per-example loss (half the squared error in units of the targets for a Gaussian
            likelihood, whatever its noise; the cross entropy for a categorical one). The
            default 0.01 is of the order of the constant rates of SWA and SWAG on CIFAR
            (0.01-0.05, Izmailov et al. 2018, Maddox et al. 2019); with the loss so scaled it
            does not depend on the noise level.
        swag_batch_size: Minibatch size of the SGD phase; ``None``: the ``map`` fit's
            ``batch_size`` when given, else 128 points but at least
            :data:`MIN_BATCHES_PER_EPOCH` minibatches per epoch (SGD on the full batch would
            settle at the mode: its spread comes from the minibatch noise).
        num_snapshots: Snapshots :math:`n` taken in the SGD phase.
        collect_every: SGD steps between snapshots; ``None``: one epoch (N / batch, rounded up).
        rank: :math:`K`, the deviation matrix's columns (the last ``rank`` snapshots), at least
            2 and at most ``num_snapshots``.
        num_draws: Draws taken from the Gaussian.
    """

    swag_learning_rate: float = 0.01
    swag_batch_size: int | None = None
    num_snapshots: int = 40
    collect_every: int | None = None
    rank: int = 20
    num_draws: int = 100

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_float("swag_learning_rate", self.swag_learning_rate)
        if self.swag_batch_size is not None:
            check_positive_int("swag_batch_size", self.swag_batch_size)
        check_positive_int("num_snapshots", self.num_snapshots)
        if self.collect_every is not None:
            check_positive_int("collect_every", self.collect_every)
        check_positive_int("rank", self.rank, minimum=2)
        if self.rank > self.num_snapshots:
            raise ValueError(
                f"rank {self.rank} exceeds num_snapshots {self.num_snapshots}: the deviation "
                "matrix takes its columns from the snapshots"
            )
        check_positive_int("num_draws", self.num_draws)
        if self.kl_weight != 1.0:
            raise ValueError(
                f"swag follows the posterior itself: kl_weight must be 1, got {self.kl_weight!r}"
            )

    @property
    def kept_draws(self) -> int:
        """Draws the result holds: ``num_draws`` from the Gaussian."""
        return self.num_draws

    def matrix_floats(self, num_weights: int) -> int:
        """The deviation matrix, weights by ``rank``."""
        return num_weights * self.rank

    def map_options(self) -> map_estimate.MAPOptions:
        """The options of the ``map`` fit behind it (:func:`~ppl_bnn.methods.map_estimate.
        map_options_of`)."""
        return map_estimate.map_options_of(self)

    def sgd_batch_size(self, num_data: int) -> int:
        """The SGD phase's minibatch size for ``num_data`` training points."""
        batch = self.swag_batch_size or self.batch_size
        if batch is None:
            batch = max(1, min(DEFAULT_BATCH_SIZE, num_data // MIN_BATCHES_PER_EPOCH))
        return check_batch_size(batch, num_data)


class SGDState(NamedTuple):
    """The unconstrained position and the step count."""

    position: dict[str, Any]
    step: Any


def sgd(
    rate: float,
) -> tuple[Callable[..., SGDState], Callable[..., tuple[SGDState, SGMCMCInfo]]]:
    """Plain SGD ascending the minibatch log joint, :math:`z \\leftarrow z + r \\nabla_z \\log
    \\tilde p`, as a pure ``(init, step)`` pair of the SG-MCMC drivers (it ignores their noise)."""

    def init(position: Mapping[str, Any]) -> SGDState:
        return SGDState(dict(position), 0)

    def step(
        state: SGDState, log_density: Any, grad: Mapping[str, Any], noise: Mapping[str, Any]
    ) -> tuple[SGDState, SGMCMCInfo]:
        position = {k: z + rate * grad[k] for k, z in state.position.items()}
        return SGDState(position, state.step + 1), SGMCMCInfo(rate + 0.0 * state.step, log_density)

    return init, step


@dataclass(frozen=True, kw_only=True)
class SGDPhase(SGMCMCOptions):
    """The SGD phase as options of the SG-MCMC drivers: one chain from ``start``, a snapshot every
    ``thinning`` steps, ``step_size`` the rate :math:`\\eta / N` of :func:`sgd`."""

    start: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def kernel(
        self, cos: Callable[[Any], Any] = math.cos, step_size: Any = None
    ) -> tuple[Callable[..., SGDState], Callable[..., tuple[SGDState, SGMCMCInfo]]]:
        return sgd(self.step_size if step_size is None else step_size)

    def initial_positions(self, model: BNN, seed: int, name: str) -> list[dict[str, np.ndarray]]:
        return [dict(self.start)]


@dataclass(frozen=True)
class SWAGGaussian:
    """The fitted Gaussian over the flat unconstrained parameters (see the module docstring)."""

    mean: np.ndarray  # (d,)
    diag_variance: np.ndarray  # (d,)
    deviations: np.ndarray  # (d, K)

    @classmethod
    def fit(cls, snapshots: np.ndarray, rank: int) -> SWAGGaussian:
        """From snapshots (n, d) in the order taken; the deviations are from the running mean."""
        n = len(snapshots)
        running = np.cumsum(snapshots, axis=0) / np.arange(1, n + 1)[:, None]
        mean = running[-1]
        diag = np.maximum(np.mean(snapshots**2, axis=0) - mean**2, 0.0)
        deviations = (snapshots - running)[n - rank :].T
        return cls(mean=mean, diag_variance=diag, deviations=deviations)

    def sample(self, rng: np.random.Generator, num: int) -> np.ndarray:
        """``num`` draws (num, d)."""
        d, k = self.deviations.shape
        xi1 = rng.standard_normal((num, d))
        xi2 = rng.standard_normal((num, k))
        return (
            self.mean
            + np.sqrt(self.diag_variance / 2) * xi1
            + xi2 @ self.deviations.T / np.sqrt(2 * (k - 1))
        )


def _flat(model: BNN, draws: Mapping[str, np.ndarray]) -> tuple[FlatLayout, np.ndarray]:
    """Snapshots (1, n, ...) per site to unconstrained rows (n, d), and their layout."""
    sites = list(model.spec.sites())
    layout = FlatLayout.of(model.spec)
    n = next(iter(draws.values())).shape[1]
    rows = np.stack(
        [
            layout.flatten({s.name: s.prior.unconstrain(draws[s.name][0, i]) for s in sites})
            for i in range(n)
        ]
    )
    return layout, rows


def _with_noise_held(target: Target, mode_draws: Mapping[str, np.ndarray]) -> Target:
    """``target`` with a learned noise fixed at the mode's std (itself without one)."""
    spec = target.spec
    if not spec.learned_noise:
        return target
    sigma = float(mode_draws[PRECISION_SITE].reshape(-1)[0]) ** -0.5
    model = BNN.from_spec(replace(spec, noise=sigma, noise_prior=None), target.model.x,
                          target.model.y)  # fmt: skip
    return Target.build(target.backend, model, target.validation)


def run(name: str, target: Target, options: SWAGOptions, seed: int) -> RunOutput:
    """``map`` from its own start, then the SGD phase on the ``sgmcmc`` driver (the noise held
    at the mode's), then the Gaussian's draws (one chain)."""
    mode = map_estimate.METHOD.run_on(target.backend)(
        "map", target, options.map_options(), child_seed(seed, f"{name}_map")
    )
    held = _with_noise_held(target, mode.draws)
    model = held.model
    sites = list(model.spec.sites())
    start = {s.name: s.prior.unconstrain(mode.draws[s.name][0, 0]) for s in sites}
    batch = options.sgd_batch_size(target.num_data)
    every = options.collect_every or math.ceil(target.num_data / batch)
    noise_variance = model.spec.noise**2 if model.spec.likelihood == "gaussian" else 1.0
    phase = SGDPhase(
        num_samples=options.num_snapshots,
        num_burnin=0,
        thinning=every,
        step_size=options.swag_learning_rate * noise_variance / target.num_data,
        batch_size=batch,
        jit=options.jit,
        start=start,
    )
    breakdown = {
        "what": "the SGD phase took a non-finite step",
        "step_option": ("swag_learning_rate", options.swag_learning_rate),
    }
    try:
        walk = get_driver(target.backend, "sgmcmc")(name, held, phase, child_seed(seed, name))
    except DivergedError as err:
        raise diverged(
            name, **breakdown, model=model, step=err.step, sites=err.sites,
            context="before any snapshot was taken",
        ) from err  # fmt: skip
    taken = next(iter(walk.draws.values())).shape[1]
    if taken < options.rank:
        raise diverged(
            name, **breakdown, model=model, step=walk.info.get("diverged_at_step"),
            sites=walk.info.get("diverged_sites", ()),
            context=f"after {taken} of {options.num_snapshots} snapshots, fewer than rank "
            f"{options.rank}",
        )  # fmt: skip
    layout, rows = _flat(model, walk.draws)
    gaussian = SWAGGaussian.fit(rows, options.rank)
    z = gaussian.sample(numpy_generator(seed, f"{name}_draws"), options.num_draws)
    draws = {}
    for s in sites:
        values = np.stack([layout.unflatten(row)[s.name] for row in z])
        values = np.exp(values) if s.prior.positive else values
        draws[s.name] = values[None].astype(np.float32)
    if target.spec.learned_noise:
        draws[PRECISION_SITE] = np.broadcast_to(
            mode.draws[PRECISION_SITE].reshape(1, 1), (1, options.num_draws)
        ).astype(np.float32)
    timings = {
        "compile": mode.timings["compile"] + walk.timings["compile"],
        "warmup": mode.timings["warmup"] + walk.timings["warmup"] + walk.timings["sampling"],
        "sampling": 0.0,
    }
    info = {
        **{k: v for k, v in walk.info.items() if k not in ("tempered",)},
        "tempered": False,
        "sgd_batch_size": batch,
        "collect_every": every,
        "snapshots": taken,
        "rank": options.rank,
        "noise_held_at": model.spec.noise if target.spec.learned_noise else None,
        "sgd_step_size": phase.step_size,
    }
    return RunOutput(draws=draws, timings=timings, losses=mode.losses, info=info)


METHOD = Method(
    name="swag",
    summary="SWAG: a Gaussian from SGD iterates after a MAP fit",
    options=SWAGOptions,
    family=Family.OPTIMISATION,
    needs_mode=True,
    smoke={"num_steps": 30, "num_snapshots": 4, "rank": 2, "collect_every": 2, "num_draws": 5},
    run=run,
    requires=("autoguide", "sgmcmc"),
    predicts_near_modes=True,
)
