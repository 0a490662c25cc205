r"""What the guide-based methods share: options, minibatch schedule, and the finished output.

Each of these methods (one module each) fits a guide :math:`q_\phi` on the unconstrained values
:math:`z = T^{-1}(\theta)` by maximising the reparameterised (beta-)ELBO with Adam (Kingma &
Welling 2014; Kingma & Ba 2015)

.. math:: \mathcal L(\phi) = \mathbb E_{q_\phi}\big[c \log p(y_B \mid \theta)
          + \log p(\theta) - \log q_\phi(\theta)\big],\qquad c = \frac{N}{|B|\,\beta},

where the likelihood scale :math:`c` is the model's ``likelihood_scale`` (minibatch and KL weight
live in the log joint). The methods differ only in the guide, each the same class in both libraries:

========== ================================== ============================================
method     guide                              posterior
========== ================================== ============================================
svi        ``AutoNormal``                     mean-field Gaussian (Blundell et al. 2015)
lowrank    ``AutoLowRankMultivariateNormal``  Gaussian, low-rank plus diagonal covariance
fullrank   ``AutoMultivariateNormal``         Gaussian, full covariance (small nets)
map        ``AutoDelta``                      point estimate (the posterior mode)
laplace    ``AutoLaplaceApproximation``       with ``hessian="full"``: Gaussian at the mode,
                                              covariance the inverse Hessian of
                                              :math:`-\log p` (MacKay 1992); the default GGN
                                              Laplace is :mod:`ppl_bnn.methods.laplace`
========== ================================== ============================================

The driver is ``autoguide`` in each backend folder (:mod:`ppl_bnn.backends.numpyro.autoguide`,
:mod:`ppl_bnn.backends.pyro.autoguide`). NumPyro scans the whole optimisation in one compiled
program. Pyro takes its steps in Python: by default the ELBO is ``JitTrace_ELBO`` and one torch
Adam (``foreach``) updates every guide parameter at once (``update="fused"``); ``update="pyro"``
takes Pyro's own ``SVI.step``, which traces the parameters at every step and keeps one Adam per
parameter. Adam is elementwise, so both updates are the same map.

A learned prior's hyperparameters (:class:`~ppl_bnn.model.priors.ScaleMixture` with
``learned=True``) are ``param`` sites of the model: both libraries' SVI optimise them with the
guide, maximising the ELBO over them (type-II maximum likelihood; with ``map`` and ``ensemble``,
the log joint). The fitted values are ``info["learned_prior"]`` (:func:`learned_prior_info`).

Posterior draws come from each library's own guide sampler (NumPyro ``sample_posterior``, Pyro
``Predictive``), seeded from the fit's seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import DivergedError, RunOutput, backend_option
from ppl_bnn.methods.checks import (
    check_batch_size,
    check_bool,
    check_positive_float,
    check_positive_int,
)
from ppl_bnn.methods.divergence import check_finite_draws, diverged, nonfinite_sites
from ppl_bnn.methods.minibatch import batch_schedule
from ppl_bnn.model.dropout import RATE_PREFIX
from ppl_bnn.model.estimators import check_estimator
from ppl_bnn.model.program import HYPERPARAMETER_PREFIX
from ppl_bnn.seeding import numpy_generator

#: Where a Gaussian guide's means start (see :mod:`ppl_bnn.methods.initialisation`).
INIT_LOCS: tuple[str, ...] = ("uniform", "prior", "map")


def check_init_loc(value: object) -> None:
    """``ValueError`` naming the allowed values unless ``value`` is one of :data:`INIT_LOCS`."""
    if not isinstance(value, str) or value not in INIT_LOCS:
        raise ValueError(f"unknown init_loc {value!r}; available: {', '.join(INIT_LOCS)}")


@dataclass(frozen=True, kw_only=True)
class OptimisationOptions:
    """Options every guide-based method shares.

    Attributes:
        num_steps: Optimisation steps.
        learning_rate: Adam step size.
        num_particles: Monte Carlo samples per ELBO estimate.
        jit: Pyro only: ``JitTrace_ELBO`` (True) or ``Trace_ELBO``. NumPyro always compiles.
        update: Pyro only: ``"fused"`` (one torch Adam over every guide parameter, the fastest)
            or ``"pyro"`` (Pyro's ``SVI.step`` with ``pyro.optim.Adam``; with ``jit=False``,
            Pyro's default path). Both apply the same Adam update.
        batch_size: Minibatch size per step (``None``: full batch). The likelihood is scaled by
            N / batch_size in the model, so each step's ELBO is unbiased for the full-data ELBO.
        kl_weight: :math:`\\beta` of beta-VI, :math:`\\mathbb E_q[\\log p(y \\mid \\theta)]
            - \\beta\\,\\mathrm{KL}(q \\| p)`; 1 is standard VI, other values are labelled
            tempered. Implemented as a likelihood scale of 1 / beta (same optimum); the recorded
            losses are the beta-ELBO's.
    """

    num_steps: int = 5000
    learning_rate: float = 0.01
    num_particles: int = 1
    jit: bool = backend_option(True)
    update: str = backend_option("fused")
    batch_size: int | None = None
    kl_weight: float = 1.0

    def __post_init__(self) -> None:
        check_positive_int("num_steps", self.num_steps)
        check_positive_float("learning_rate", self.learning_rate)
        check_positive_int("num_particles", self.num_particles)
        check_bool("jit", self.jit)
        if self.batch_size is not None:
            check_positive_int("batch_size", self.batch_size)
        check_positive_float("kl_weight", self.kl_weight)

    def likelihood_scale(self, num_data: int) -> tuple[int, float]:
        """``(batch size, likelihood scale N / (batch size * kl_weight))`` for ``num_data``."""
        batch = num_data if self.batch_size is None else self.batch_size
        check_batch_size(batch, num_data)
        return batch, num_data / batch / self.kl_weight

    @property
    def draws(self) -> int:
        """Posterior draws taken from the fitted guide."""
        return 1

    @property
    def kept_draws(self) -> int:
        """Draws the result holds (:mod:`ppl_bnn.methods.memory`)."""
        return self.draws

    def matrix_floats(self, num_weights: int) -> int:
        """Floats of the largest matrix the fit holds beyond its draws (a covariance factor)."""
        return 0

    def guide_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the autoguide class (beyond the model and init_loc_fn)."""
        return {}

    def kept_iterate(self, num_data: int) -> str:
        """Which iterate the driver keeps on ``num_data`` training points: ``"last"``, or
        ``map``'s ``keep`` (``"lowest"``, :func:`kept_step`; ``"validation"``,
        :mod:`ppl_bnn.methods.early_stopping`)."""
        return "last"

    #: The autoguide class, by its name in both ``numpyro.infer.autoguide`` and
    #: ``pyro.infer.autoguide``; set by each method's options.
    GUIDE: ClassVar[str]


@dataclass(frozen=True, kw_only=True)
class SampledGuideOptions(OptimisationOptions):
    """Options of a guide that is a distribution: ``num_draws`` taken from it after fitting."""

    num_draws: int = 1000

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("num_draws", self.num_draws)

    @property
    def draws(self) -> int:
        return self.num_draws


@dataclass(frozen=True, kw_only=True)
class GaussianGuideOptions(SampledGuideOptions):
    """Options of the Gaussian variational guides (``svi``, ``lowrank``, ``fullrank``).

    Attributes:
        init_loc: Where the guide's means start (:mod:`ppl_bnn.methods.initialisation`):
            ``"uniform"`` (U(-2, 2) in unconstrained space, the libraries' default),
            ``"prior"`` (a prior draw) or ``"map"`` (the mode of a short MAP fit, the default).
            ``"map"`` is the default because a uniform or prior start's weights (std about 1)
            saturate a layer with many inputs, such as an MNIST MLP's first layer, while a
            short MAP fit starts the means where the network already fits the data. No start
            gives a tanh network epistemic spread outside its data: its draws level off
            there, so their spread is no larger than inside.
        init_map_steps: ``init_loc="map"`` only: Adam steps of the MAP fit (same learning
            rate, batch size and KL weight as the fit). Kept short: a long MAP fit can settle
            SVI in an overfitted mode.
        init_scale: Initial std of the guide (the libraries' default, 0.1).
        estimator: The ELBO's gradient estimator (:mod:`ppl_bnn.model.estimators`):
            ``"reparam"`` (the library's autoguide), or, for the mean-field guide only,
            ``"local_reparam"`` or ``"flipout"`` (:mod:`ppl_bnn.methods.meanfield`; on Pyro
            eager torch steps with one fused Adam: ``jit`` and ``update`` do not apply).
    """

    init_loc: str = "map"
    init_map_steps: int = 200
    init_scale: float = 0.1
    estimator: str = "reparam"

    #: The estimators this guide accepts: each weight sampled on its own needs a mean-field one.
    ESTIMATORS: ClassVar[tuple[str, ...]] = ("reparam",)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_init_loc(self.init_loc)
        check_positive_int("init_map_steps", self.init_map_steps)
        check_positive_float("init_scale", self.init_scale)
        check_estimator(self.estimator)
        if self.estimator not in self.ESTIMATORS:
            raise ValueError(
                f"estimator {self.estimator!r} samples each weight's pre-activations on its own "
                f"and needs the mean-field guide (method 'svi'); the {self.GUIDE} guide takes "
                f"estimator: {', '.join(map(repr, self.ESTIMATORS))}"
            )

    @property
    def driver(self) -> str:
        """The backend driver that fits it: ``autoguide``, or ``meanfield`` for an estimator
        other than ``reparam``."""
        return "autoguide" if self.estimator == "reparam" else "meanfield"

    def guide_kwargs(self) -> dict[str, Any]:
        return {"init_scale": self.init_scale}


HESSIAN_MESSAGE = (
    "laplace: the Hessian of -log p at the optimum found after {steps} steps is not positive "
    "definite, so it defines no Gaussian; the optimisation may not have reached a mode "
    "(raise num_steps) or the mode is degenerate"
)


def loss_error(
    name: str,
    target: Target,
    options: OptimisationOptions,
    step: int,
    sites: Sequence[str] = (),
) -> DivergedError:
    """The error of an optimisation whose loss became non-finite at ``step``."""
    return diverged(
        name,
        "the loss became non-finite",
        target.model,
        step=step,
        sites=sites,
        step_option=("learning_rate", options.learning_rate),
    )


def check_losses(
    name: str,
    target: Target,
    options: OptimisationOptions,
    losses: np.ndarray,
    params: Mapping[str, Any],
) -> None:
    """:func:`loss_error` when a loss is not finite.

    A NaN or infinite loss (or gradient, which makes the next loss NaN) leaves a guide with no
    usable distribution, so the fit stops, naming the step, the guide's non-finite sites
    (``params``: the guide parameters by the library's names) and the likely cause. Call it
    before the guide is used (Laplace's Hessian, posterior draws).
    """
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        sites = nonfinite_sites(params, target.model)
        raise loss_error(name, target, options, int(bad[0]), sites)


def learned_prior_info(target: Target, params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"learned_prior": {"pi": ..., ...}}``: the learned prior's fitted hyperparameters from
    ``params`` (constrained values by param site name), or ``{}`` without a learned prior."""
    learned = target.spec.learned_prior
    if learned is None:
        return {}
    values = {
        name: float(np.asarray(params[HYPERPARAMETER_PREFIX + name]))
        for name in learned.hyperparameters
    }
    return {"learned_prior": values}


def dropout_rates_info(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"dropout_rates": {"w0": ..., ...}}``: concrete dropout's learned rates from ``params``
    (constrained values by param site name; :mod:`ppl_bnn.model.dropout`), by the weight site
    of their layer, or ``{}`` without any."""
    rates = {
        "w" + name[len(RATE_PREFIX) :]: float(np.asarray(value))
        for name, value in params.items()
        if name.startswith(RATE_PREFIX)
    }
    return {"dropout_rates": rates} if rates else {}


def finish(
    name: str,
    target: Target,
    options: OptimisationOptions,
    losses: np.ndarray,
    draws: dict[str, np.ndarray],
    timings: dict[str, float],
    variational: dict | None,
    info: dict[str, Any],
) -> RunOutput:
    """The driver's output, draws shaped (1, draws, ...) and checked finite."""
    losses = options.kl_weight * losses
    info.update(
        {
            "batch_size": options.likelihood_scale(target.num_data)[0],
            "kl_weight": options.kl_weight,
            "tempered": options.kl_weight != 1.0,
        }
    )
    sites = {s.name: s.shape for s in target.spec.sites()}
    draws = {
        k: np.asarray(v, dtype=np.float32).reshape(1, options.draws, *sites[k])
        for k, v in draws.items()
        if k in sites
    }
    check_finite_draws(name, draws, target.model)
    return RunOutput(
        draws=draws, timings=timings, losses=losses, variational=variational, info=info
    )


def kept_step(losses: np.ndarray, final_loss: float) -> int:
    """The steps taken before the iterate of lowest loss, among the parameters after each step:
    ``losses[i]`` is the loss at the parameters after ``i`` steps (each step's loss is taken
    before its update), ``final_loss`` the loss after the last. Ties go to the later iterate,
    so a loss that never rose keeps the last (``len(losses)``). Call it after
    :func:`check_losses`; the loss before the first step, at the start, is not a candidate."""
    after = np.append(np.asarray(losses, dtype=np.float64)[1:], final_loss)
    return 1 + int(after.size - 1 - np.argmin(after[::-1]))


def batch_schedule_for(
    num_data: int, batch: int, options: OptimisationOptions, seed: int
) -> np.ndarray | None:
    """Each step's minibatch indices (see :mod:`ppl_bnn.methods.minibatch`), the same for both
    backends; ``None`` when every step takes the full data."""
    if batch == num_data:
        return None
    return batch_schedule(num_data, batch, options.num_steps, numpy_generator(seed, "svi_batches"))
