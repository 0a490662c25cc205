r"""Variational and point-estimate methods built on the PPLs' autoguides.

Every method here fits a guide :math:`q_\phi` on the unconstrained values :math:`z = T^{-1}(\theta)`
by maximising the reparameterised (beta-)ELBO with Adam (Kingma & Welling 2014; Kingma & Ba 2015)

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
laplace    ``AutoLaplaceApproximation``       Gaussian at the mode, covariance the inverse
                                              Hessian of :math:`-\log p` (MacKay 1992)
========== ================================== ============================================

NumPyro scans the whole optimisation in one compiled program. Pyro takes its steps in Python:
by default the ELBO is ``JitTrace_ELBO`` and one torch Adam (``foreach``) updates every guide
parameter at once (``update="fused"``); ``update="pyro"`` takes Pyro's own ``SVI.step``, which
traces the parameters at every step and keeps one Adam per parameter. Adam is elementwise, so both
updates are the same map.

Posterior draws come from each library's own guide sampler (NumPyro ``sample_posterior``, Pyro
``Predictive``), seeded from the fit's seed.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppl_bnn.methods.common import (
    HessianError,
    RunOutput,
    check_batch_size,
    check_positive_float,
    check_positive_int,
    pyro_scope,
    seeded_torch,
)
from ppl_bnn.methods.minibatch import batch_schedule
from ppl_bnn.model import BNN
from ppl_bnn.registry import register
from ppl_bnn.seeding import child_seed, numpy_generator
from ppl_bnn.timing import now

logger = logging.getLogger(__name__)

#: Pyro's optimiser updates: one fused Adam over all guide parameters, or Pyro's ``SVI.step``.
PYRO_UPDATES: tuple[str, ...] = ("fused", "pyro")


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
    jit: bool = True
    update: str = "fused"
    batch_size: int | None = None
    kl_weight: float = 1.0

    def __post_init__(self) -> None:
        check_positive_int("num_steps", self.num_steps)
        check_positive_float("learning_rate", self.learning_rate)
        check_positive_int("num_particles", self.num_particles)
        if not isinstance(self.jit, bool):
            raise ValueError(f"jit must be True or False, got {self.jit!r}")
        if self.update not in PYRO_UPDATES:
            raise ValueError(
                f"unknown update {self.update!r}; available: {', '.join(PYRO_UPDATES)}"
            )
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

    def guide_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the autoguide class (beyond the model and init_loc_fn)."""
        return {}


@dataclass(frozen=True, kw_only=True)
class MAPOptions(OptimisationOptions):
    """Options of ``fit(..., method="map")``: the point estimate is kept as a single draw."""


@dataclass(frozen=True, kw_only=True)
class LaplaceOptions(OptimisationOptions):
    """Options of ``fit(..., method="laplace")``; ``num_draws`` from the Gaussian at the mode."""

    num_draws: int = 1000

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("num_draws", self.num_draws)

    @property
    def draws(self) -> int:
        return self.num_draws


@dataclass(frozen=True, kw_only=True)
class SVIOptions(LaplaceOptions):
    """Options of ``fit(..., method="svi")`` (and ``fullrank``).

    Attributes:
        init_scale: Initial std of the guide (the libraries' default, 0.1).
    """

    init_scale: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_float("init_scale", self.init_scale)

    def guide_kwargs(self) -> dict[str, Any]:
        return {"init_scale": self.init_scale}


@dataclass(frozen=True, kw_only=True)
class LowRankOptions(SVIOptions):
    """Options of ``fit(..., method="lowrank")``; ``rank`` of the covariance factor
    (``None``: the libraries' default, about the square root of the number of weights)."""

    rank: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rank is not None:
            check_positive_int("rank", self.rank)

    def guide_kwargs(self) -> dict[str, Any]:
        return {**super().guide_kwargs(), "rank": self.rank}


#: Method -> autoguide class name (the same in ``numpyro.infer.autoguide`` and
#: ``pyro.infer.autoguide``).
GUIDES = {
    "svi": "AutoNormal",
    "lowrank": "AutoLowRankMultivariateNormal",
    "fullrank": "AutoMultivariateNormal",
    "map": "AutoDelta",
    "laplace": "AutoLaplaceApproximation",
}


_HESSIAN_MESSAGE = (
    "laplace: the Hessian of -log p at the optimum found after {steps} steps is not positive "
    "definite, so it defines no Gaussian; the optimisation may not have reached a mode "
    "(raise num_steps) or the mode is degenerate"
)


def _check_finite(losses: np.ndarray, info: dict[str, Any]) -> None:
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        info["diverged_at_step"] = int(bad[0])
        logger.warning("loss became non-finite at step %d", bad[0])


def _output(
    model: BNN,
    options: OptimisationOptions,
    losses: np.ndarray,
    draws: dict[str, np.ndarray],
    timings: dict[str, float],
    variational: dict | None,
    info: dict[str, Any],
) -> RunOutput:
    losses = options.kl_weight * losses
    info.update(
        {
            "batch_size": options.likelihood_scale(model.num_data)[0],
            "kl_weight": options.kl_weight,
            "tempered": options.kl_weight != 1.0,
        }
    )
    _check_finite(losses, info)
    sites = {s.name: s.shape for s in model.spec.sites()}
    draws = {
        k: np.asarray(v, dtype=np.float32).reshape(1, options.draws, *sites[k])
        for k, v in draws.items()
        if k in sites
    }
    return RunOutput(
        draws=draws, timings=timings, losses=losses, variational=variational, info=info
    )


def _batch_schedule(
    num_data: int, batch: int, options: OptimisationOptions, seed: int
) -> np.ndarray | None:
    """Each step's minibatch indices (see :mod:`ppl_bnn.methods.minibatch`), the same for both
    backends; ``None`` when every step takes the full data."""
    if batch == num_data:
        return None
    return batch_schedule(num_data, batch, options.num_steps, numpy_generator(seed, "svi_batches"))


def _run_numpyro(method: str, model: BNN, options: OptimisationOptions, seed: int) -> RunOutput:
    import jax
    import jax.numpy as jnp
    from jax import lax
    from numpyro.infer import SVI, Trace_ELBO, autoguide, init_to_uniform
    from numpyro.optim import Adam

    from ppl_bnn.backends import numpyro_backend as backend

    x, y = backend.data(model.spec, model.x, model.y)
    program = backend.model(model.spec)
    guide = getattr(autoguide, GUIDES[method])(
        program, init_loc_fn=init_to_uniform, **options.guide_kwargs()
    )
    svi = SVI(program, guide, Adam(options.learning_rate), Trace_ELBO(options.num_particles))
    batch, scale = options.likelihood_scale(model.num_data)
    full_scale = 1.0 / options.kl_weight
    schedule = _batch_schedule(model.num_data, batch, options, seed)
    schedule = None if schedule is None else jnp.asarray(schedule)

    def one_step(state, idx):
        xb, yb = (x, y) if idx is None else (x[idx], y[idx])
        return svi.update(state, xb, yb, likelihood_scale=scale)

    def optimise(state, schedule):
        return lax.scan(one_step, state, schedule, length=options.num_steps)

    key_init, key_draws = jax.random.split(jax.random.PRNGKey(child_seed(seed, "svi")))
    start = now()
    # Initialised on the full data so that Laplace's Hessian is the full-data one.
    state = svi.init(key_init, x, y, likelihood_scale=full_scale)
    compiled = jax.jit(optimise).lower(state, schedule).compile()
    compiled_at = now()
    state, losses = jax.block_until_ready(compiled(state, schedule))
    end = now()
    params = svi.get_params(state)
    if method == "laplace":
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="Hessian of log posterior at the MAP")
            try:
                guide.get_transform(params)
            except UserWarning as err:
                raise HessianError(_HESSIAN_MESSAGE.format(steps=options.num_steps)) from err
    sample = jax.jit(lambda key, p: guide.sample_posterior(key, p, sample_shape=(options.draws,)))
    sample = sample.lower(key_draws, params).compile()
    sampler_compiled = now()
    draws = jax.block_until_ready(sample(key_draws, params))
    drawn = now()
    variational = None
    if method == "svi":
        names = [site.name for site in model.spec.sites()]
        variational = {
            kind: {name: np.asarray(params[f"{name}_auto_{kind}"]) for name in names}
            for kind in ("loc", "scale")
        }
    # Initialisation traces the model and guide; lower().compile() builds the whole scan and
    # the guide sampler.
    timings = {
        "compile": (compiled_at - start) + (sampler_compiled - end),
        "warmup": end - compiled_at,
        "sampling": drawn - sampler_compiled,
    }
    info = {"elbo": "Trace_ELBO", "guide": GUIDES[method]}
    draws = {k: np.asarray(v) for k, v in draws.items()}
    return _output(model, options, np.asarray(losses), draws, timings, variational, info)


class _FusedAdamStep:
    """One Pyro SVI step: the ELBO's gradients, then one torch Adam over every guide parameter.

    Pyro's ``SVI.step`` makes the same update, but traces the model and guide for their parameters
    at every step and keeps one optimiser per parameter, which costs more than the compiled ELBO
    on a small network. The parameters are those the first step creates in the param store.
    """

    def __init__(self, model: Any, guide: Any, elbo: Any, learning_rate: float) -> None:
        self.model, self.guide, self.elbo = model, guide, elbo
        self.learning_rate = learning_rate
        self.optimizer: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> float:
        loss = self.elbo.loss_and_grads(self.model, self.guide, *args, **kwargs)
        if self.optimizer is None:
            self.optimizer = self._adam()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss)

    def _adam(self) -> Any:
        import pyro
        import torch

        params = [p for _, p in pyro.get_param_store().named_parameters()]
        return torch.optim.Adam(params, lr=self.learning_rate, foreach=True)


def _run_pyro(method: str, model: BNN, options: OptimisationOptions, seed: int) -> RunOutput:
    import pyro
    import torch
    from pyro.infer import SVI, JitTrace_ELBO, Predictive, Trace_ELBO, autoguide
    from pyro.infer.autoguide import init_to_uniform

    from ppl_bnn.backends import pyro_backend as backend

    x, y = backend.data(model.spec, model.x, model.y)
    program = backend.model(model.spec)
    elbo_cls = JitTrace_ELBO if options.jit else Trace_ELBO
    elbo_kwargs = {"num_particles": options.num_particles, "max_plate_nesting": 1}
    if options.num_particles > 1:
        elbo_kwargs["vectorize_particles"] = True
    if options.jit:
        elbo_kwargs["ignore_jit_warnings"] = True
    batch, scale = options.likelihood_scale(model.num_data)
    schedule = _batch_schedule(model.num_data, batch, options, seed)
    batches = None if schedule is None else torch.from_numpy(schedule).long()
    names = [site.name for site in model.spec.sites()]

    def step(i: int) -> float:
        if batches is None:
            return update(x, y, likelihood_scale=scale)
        return update(x[batches[i]], y[batches[i]], likelihood_scale=scale)

    losses = np.empty(options.num_steps, dtype=np.float64)
    with pyro_scope(), seeded_torch(child_seed(seed, "svi")):
        guide = getattr(autoguide, GUIDES[method])(
            program, init_loc_fn=init_to_uniform, **options.guide_kwargs()
        )
        elbo = elbo_cls(**elbo_kwargs)
        if options.update == "pyro":
            adam = pyro.optim.Adam({"lr": options.learning_rate})
            update = SVI(program, guide, adam, elbo).step
        else:
            update = _FusedAdamStep(program, guide, elbo, options.learning_rate)
        start = now()
        # The first step traces the model and guide (and JIT-compiles them with JitTrace_ELBO).
        losses[0] = step(0)
        first = now()
        for i in range(1, options.num_steps):
            losses[i] = step(i)
        end = now()
        if method == "laplace":
            try:
                guide = guide.laplace_approximation(x, y, likelihood_scale=1.0 / options.kl_weight)
            except (RuntimeError, ValueError) as err:  # Cholesky of a non-PD covariance
                raise HessianError(_HESSIAN_MESSAGE.format(steps=options.num_steps)) from err
        predictive = Predictive(
            program, guide=guide, num_samples=options.draws, return_sites=names, parallel=True
        )
        with torch.no_grad():
            draws = {k: v.numpy() for k, v in predictive(x[:1], y[:1]).items()}
            variational = None
            if method == "svi":
                variational = {
                    kind: {
                        name: getattr(getattr(guide, kind + "s"), name).detach().numpy().copy()
                        for name in names
                    }
                    for kind in ("loc", "scale")
                }
        drawn = now()
    timings = {"compile": first - start, "warmup": end - first, "sampling": drawn - end}
    info = {
        "elbo": elbo_cls.__name__,
        "update": options.update,
        "guide": GUIDES[method],
        "torch_threads": torch.get_num_threads(),
    }
    return _output(model, options, losses, draws, timings, variational, info)


def _runners(method: str) -> dict[str, Any]:
    def numpyro_runner(model: BNN, options: OptimisationOptions, seed: int) -> RunOutput:
        return _run_numpyro(method, model, options, seed)

    def pyro_runner(model: BNN, options: OptimisationOptions, seed: int) -> RunOutput:
        return _run_pyro(method, model, options, seed)

    return {"numpyro": numpyro_runner, "pyro": pyro_runner}


register("svi", SVIOptions, _runners("svi"))
register("lowrank", LowRankOptions, _runners("lowrank"))
register("fullrank", SVIOptions, _runners("fullrank"))
register("map", MAPOptions, _runners("map"))
register("laplace", LaplaceOptions, _runners("laplace"))
