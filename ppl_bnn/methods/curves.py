r"""Training curves of ``svi``: the ELBO split into its two parts, and the held-out
log-likelihood, at regular checkpoints of the optimisation.

Each step's loss is a one-draw estimate of the negative beta-ELBO
(:mod:`ppl_bnn.methods.optimisation`),

.. math:: \hat L_t = -\hat\ell_t + \beta\,\widehat{\mathrm{KL}}_t,\qquad
          \hat\ell_t = \frac{N}{|B_t|} \sum_{i \in B_t} \log p(y_i \mid x_i, \theta_t),

with :math:`\theta_t \sim q` the step's draw: :math:`\hat\ell_t` is an unbiased estimate of the
expected log-likelihood :math:`\mathbb E_q[\log p(y \mid \theta)]` on all :math:`N` training
points, and :math:`\widehat{\mathrm{KL}}_t = \hat L_t / \beta + \hat\ell_t / \beta` the loss's
own estimate of :math:`\mathrm{KL}(q \,\|\, p)` (:math:`\log q - \log p` at the draw; for the
``meanfield`` driver the closed form for Normal-prior weights). The drivers return
:math:`\hat\ell_t` with each loss, from the same draw, so the split costs no extra forward pass.

Every ``every`` steps (and at the last step) a checkpoint records, over the steps since the last
one (its *window*):

========================= ==============================================================
``step``                  steps taken at the checkpoint
``loss``                  window mean of :math:`\hat L_t` (the recorded losses)
``expected_log_lik``      window mean of :math:`\hat\ell_t` (nats, full-data scale)
``kl``                    window mean of :math:`\widehat{\mathrm{KL}}_t`, so that
                          ``-loss = expected_log_lik - kl_weight * kl`` holds to rounding
``kl_checkpoint``         :math:`\mathrm{KL}(q \,\|\, p)` of the guide at the checkpoint: the
                          closed form for Normal-prior sites (:func:`~ppl_bnn.methods.
                          meanfield.closed_form_kl`), a Monte Carlo estimate from
                          :data:`HELD_OUT_DRAWS` draws for the others (``kl_form`` says
                          which); not recorded with a learned prior
``held_out_ll``           with a validation set: the mean over its points (at most
                          :data:`MAX_HELD_OUT`, a fixed random subset of larger sets) of
                          :math:`\log \frac1S \sum_s p(y_n \mid x_n, \theta_s)` from
                          :data:`HELD_OUT_DRAWS` guide draws (fixed seed), in the model's
                          units (standardised targets where the data were standardised)
========================= ==============================================================

A point guide (``map`` with ``keep="validation"``, :mod:`ppl_bnn.methods.early_stopping`)
records the held-out log-likelihood of its point (:meth:`TrainingCurve.checkpoint_point`);
with ``keep_best`` the curve keeps what the driver hands it at the checkpoint of highest
held-out log-likelihood, and is stored as ``info["early_stopping"]``.

The cost: the split is free; a checkpoint costs :data:`HELD_OUT_DRAWS` forward passes over at
most :data:`MAX_HELD_OUT` validation points and a closed-form KL (one pass over the guide's
parameters). With the default of :data:`CURVE_POINTS` checkpoints that is at most 125,000
example forward passes in all, whatever ``num_steps`` is: fewer than the forward passes alone of
1,000 minibatch steps of 128 (``timings["curves"]`` records the time, which is taken out of
``warmup``). On NumPyro the optimisation is then compiled as one scan of ``every`` steps, run
once per checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppl_bnn.methods.meanfield import closed_form_kl, monte_carlo_kl
from ppl_bnn.metrics.baseline import mean_log_predictive_density
from ppl_bnn.model.priors import Normal
from ppl_bnn.model.spec import BNNSpec
from ppl_bnn.predictive import log_likelihood_per_draw, predictive_at
from ppl_bnn.seeding import numpy_generator
from ppl_bnn.timing import now

#: Checkpoints of a fit given a validation set and no ``curve_every``.
CURVE_POINTS = 50
#: Guide draws per checkpoint for the held-out log-likelihood (and a Monte Carlo KL).
HELD_OUT_DRAWS = 5
#: Held-out points scored at a checkpoint: a larger set's fixed random subset (seed 0, the same
#: for every fit) of this many.
MAX_HELD_OUT = 500
#: Where the curve is stored: ``FitResult.info[CURVE_KEY]``.
CURVE_KEY = "training_curve"
#: Where early stopping's checkpoints are stored: ``FitResult.info[STOPPING_KEY]``.
STOPPING_KEY = "early_stopping"


def curve_every(options: Any, num_steps: int, has_validation: bool) -> int:
    """Steps between checkpoints, 0 for none: ``options.curve_every`` where given (0 turns the
    curves off), else ``num_steps // CURVE_POINTS`` (at least 1) with a validation set and
    none without. Options without ``curve_every`` (other methods) record none."""
    every = getattr(options, "curve_every", 0)
    if every is None:
        return max(1, num_steps // CURVE_POINTS) if has_validation else 0
    return int(every)


def checkpoint_steps(num_steps: int, every: int) -> list[int]:
    """Steps taken at each checkpoint: every ``every`` steps and at the last."""
    steps = list(range(every, num_steps + 1, every))
    if not steps or steps[-1] != num_steps:
        steps.append(num_steps)
    return steps


def _kl_closed(prior: Any, loc: np.ndarray, scale: np.ndarray) -> float | None:
    value = closed_form_kl(prior, loc.astype(np.float64), scale.astype(np.float64), np)
    return None if value is None else float(value)


def guide_kl(
    spec: BNNSpec,
    loc: Mapping[str, np.ndarray],
    scale: Mapping[str, np.ndarray],
    z: Mapping[str, np.ndarray],
) -> float:
    r""":math:`\mathrm{KL}(q \,\|\, p)` of the mean-field guide ``(loc, scale)`` (unconstrained
    space, by site): closed form for Normal-prior sites, and for the others the Monte Carlo
    mean of :math:`\log q(z) - \log p(z)` over the draws ``z`` (S, *site_shape) (of the closed
    form given each draw of its latent sites, for a site under a hierarchical prior)."""
    total = 0.0
    sites = spec.sites()
    positive = {
        site.name: np.exp(np.asarray(z[site.name], dtype=np.float64))
        for site in sites
        if site.positive
    }
    for site in sites:
        m, s = (np.asarray(v[site.name], dtype=np.float64) for v in (loc, scale))
        closed = None if site.latent else _kl_closed(site.prior, m, s)
        if closed is None:  # per draw, given that draw of its latent sites where it has any
            kls = []
            for i, draw in enumerate(np.asarray(z[site.name], dtype=np.float64)):
                prior = site.prior_given({n: positive[n][i] for _, n in site.latent})
                given = _kl_closed(prior, m, s)
                kls.append(monte_carlo_kl(prior, m, s, draw, np) if given is None else given)
            closed = float(np.mean(kls))
        total += closed
    return total


def kl_form(spec: BNNSpec) -> str:
    """How :func:`guide_kl` computes the KL of ``spec``'s sites, in words."""
    normal = [isinstance(site.prior, Normal) for site in spec.sites()]
    if all(normal):
        return "closed form"
    if not any(normal):
        return f"Monte Carlo ({HELD_OUT_DRAWS} draws)"
    return f"closed form (Normal-prior sites), Monte Carlo ({HELD_OUT_DRAWS} draws) for the rest"


@dataclass
class TrainingCurve:
    """Checkpoints of one fit, filled in by a driver (:meth:`checkpoint` at each of
    :attr:`steps`, :meth:`info` once the losses are known).

    Attributes:
        backend: The backend (forward passes for the held-out log-likelihood).
        spec: The model spec.
        every: Steps between checkpoints.
        num_steps: Steps of the fit.
        kl_weight: :math:`\\beta`.
        validation: ``(x_val, y_val)``, checked numpy arrays, or None (at most
            :data:`MAX_HELD_OUT` points are kept).
        seed: The fit's seed (the guide draws at each checkpoint use its child seed
            ``"curve_draws"``, the same at every checkpoint).
        keep_best: Keep the driver's parameters at the checkpoint of highest held-out
            log-likelihood (:attr:`best`, :attr:`best_step`; early stopping).
    """

    backend: str
    spec: BNNSpec
    every: int
    num_steps: int
    kl_weight: float
    validation: tuple[np.ndarray, np.ndarray] | None
    seed: int
    keep_best: bool = False

    def __post_init__(self) -> None:
        self.steps = checkpoint_steps(self.num_steps, self.every)
        if self.validation is not None and len(self.validation[1]) > MAX_HELD_OUT:
            x, y = self.validation
            keep = np.sort(np.random.default_rng(0).choice(len(y), MAX_HELD_OUT, replace=False))
            self.validation = (x[keep], y[keep])
        self.kl_checkpoint: list[float] = []
        self.held_out_ll: list[float] = []
        self.seconds = 0.0
        self.best: Any = None
        self.best_ll = -math.inf
        self.best_step: int | None = None

    def checkpoint(self, loc: Mapping[str, Any], scale: Mapping[str, Any]) -> None:
        """Record the guide ``(loc, scale)`` (unconstrained, by site) at the next checkpoint."""
        start = now()
        loc = {k: np.asarray(v, dtype=np.float32) for k, v in loc.items()}
        scale = {k: np.asarray(v, dtype=np.float32) for k, v in scale.items()}
        rng = numpy_generator(self.seed, "curve_draws")
        z = {
            site.name: loc[site.name]
            + scale[site.name]
            * rng.standard_normal((HELD_OUT_DRAWS, *site.shape), dtype=np.float32)
            for site in self.spec.sites()
        }
        if self.spec.learned_prior is None:
            self.kl_checkpoint.append(guide_kl(self.spec, loc, scale, z))
        if self.validation is not None:
            draws = {
                site.name: np.exp(z[site.name]) if site.positive else z[site.name]
                for site in self.spec.sites()
            }
            self.held_out_ll.append(self._held_out(draws))
        self.seconds += now() - start

    def checkpoint_point(
        self, values: Mapping[str, Any], keep: Callable[[], Any] | None = None
    ) -> None:
        """Record a point guide's ``values`` (constrained, by site) at the next checkpoint: the
        held-out log-likelihood of that one point. With :attr:`keep_best`, ``keep()`` is
        called and its result kept when it is the highest so far (ties to the earlier; the
        first checkpoint's is kept whatever its value)."""
        start = now()
        draws = {k: np.asarray(v, dtype=np.float32)[None] for k, v in values.items()}
        ll = self._held_out(draws)
        self.held_out_ll.append(ll)
        if self.keep_best and keep is not None and (self.best_step is None or ll > self.best_ll):
            self.best, self.best_ll = keep(), ll
            self.best_step = self.steps[len(self.held_out_ll) - 1]
        self.seconds += now() - start

    def _held_out(self, draws: Mapping[str, np.ndarray]) -> float:
        """Mean log predictive density of the validation set under ``draws`` (S, *shape),
        constrained, by site."""
        x, y = self.validation  # type: ignore[misc]
        draws = {name: value[None] for name, value in draws.items()}
        pred = predictive_at(self.backend, self.spec, draws, x)
        ll = log_likelihood_per_draw(self.spec, pred.f, pred.noise_std, y)
        return mean_log_predictive_density(ll)

    def info(self, losses: np.ndarray, log_lik: np.ndarray) -> dict[str, Any]:
        """``{CURVE_KEY: {...}}`` from the driver's per-step ``losses`` (negative ELBO with the
        likelihood scaled by :math:`N / (|B| \\beta)`, before :func:`~ppl_bnn.methods.
        optimisation.finish` multiplies them by :math:`\\beta`) and ``log_lik`` (each step's
        likelihood term, scaled the same way). Early stopping (:attr:`keep_best`) records
        ``{STOPPING_KEY: {...}}`` instead: the checkpoints' steps and held-out
        log-likelihoods (on points held out of the training data, not a test set), the
        number of held-out points and the kept step."""
        if self.keep_best:
            _, y_val = self.validation  # type: ignore[misc]
            stopping = {"step": list(self.steps), "held_out_ll": self.held_out_ll}
            stopping.update(num_held_out=len(y_val), kept_step=self.best_step)
            return {STOPPING_KEY: stopping}
        beta = self.kl_weight
        losses = np.asarray(losses, dtype=np.float64)
        log_lik = np.asarray(log_lik, dtype=np.float64)
        kl_steps = losses + log_lik  # the loss's own KL estimate
        rows: dict[str, list[float]] = {"loss": [], "expected_log_lik": [], "kl": []}
        begin = 0
        for end in self.steps:
            window = slice(begin, end)
            rows["loss"].append(float(beta * losses[window].mean()))
            rows["expected_log_lik"].append(float(beta * log_lik[window].mean()))
            rows["kl"].append(float(kl_steps[window].mean()))
            begin = end
        curve: dict[str, Any] = {"step": list(self.steps), **rows, "kl_weight": beta}
        curve.update(every=self.every, draws=HELD_OUT_DRAWS, seconds=self.seconds)
        if self.kl_checkpoint:
            curve.update(kl_checkpoint=self.kl_checkpoint, kl_form=kl_form(self.spec))
        if self.validation is not None:
            curve.update(held_out_ll=self.held_out_ll, num_held_out=len(self.validation[1]))
        return {CURVE_KEY: curve}


def make_curve(
    target: Any,
    options: Any,
    seed: int,
    num_steps: int | None = None,
    *,
    keep_best: bool = False,
) -> TrainingCurve | None:
    """The :class:`TrainingCurve` of a fit of ``target`` with ``options``, or None when it
    records none (see :func:`curve_every`). ``keep_best`` (early stopping, which needs the
    target's validation set) records one at :data:`CURVE_POINTS` checkpoints where the options
    would record none."""
    steps = options.num_steps if num_steps is None else num_steps
    validation = getattr(target, "validation", None)
    every = curve_every(options, steps, validation is not None)
    if keep_best:
        if validation is None:
            raise ValueError("early stopping needs a validation set")
        every = every or max(1, steps // CURVE_POINTS)
    if every == 0:
        return None
    return TrainingCurve(
        backend=target.backend,
        spec=target.spec,
        every=min(every, steps),
        num_steps=steps,
        kl_weight=options.kl_weight,
        validation=validation,
        seed=seed,
        keep_best=keep_best,
    )
