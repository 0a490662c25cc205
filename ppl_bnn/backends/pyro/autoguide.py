"""The ``autoguide`` driver on Pyro: SVI with the library's autoguides (see
:mod:`ppl_bnn.methods.optimisation`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyro
import torch
from pyro.infer import SVI, JitTrace_ELBO, Predictive, Trace_ELBO
from pyro.infer.autoguide import init_to_value

from ppl_bnn.backends.pyro.device import to_numpy
from ppl_bnn.backends.pyro.elbo import LikelihoodTraceELBO
from ppl_bnn.backends.pyro.guides import guide_class
from ppl_bnn.backends.pyro.rng import pyro_scope, seeded_torch
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import HessianError, RunOutput
from ppl_bnn.methods.curves import make_curve
from ppl_bnn.methods.early_stopping import held_out_split
from ppl_bnn.methods.initialisation import add_start, initial_values
from ppl_bnn.methods.optimisation import (
    HESSIAN_MESSAGE,
    OptimisationOptions,
    batch_schedule_for,
    check_losses,
    dropout_rates_info,
    finish,
    kept_step,
    learned_prior_info,
)
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


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
        params = [p for _, p in pyro.get_param_store().named_parameters()]
        return torch.optim.Adam(params, lr=self.learning_rate, foreach=True)


def _guide_at(guide: Any, names: list[str]) -> tuple[dict[str, Any], ...]:
    """An ``AutoNormal`` guide's ``(loc, scale)`` by site, as numpy arrays."""
    with torch.no_grad():
        return tuple(
            {name: to_numpy(getattr(getattr(guide, kind), name)).copy() for name in names}
            for kind in ("locs", "scales")
        )


def _point_at(guide: Any, names: list[str]) -> dict[str, np.ndarray]:
    """An ``AutoDelta`` guide's values by site (constrained), as numpy arrays."""
    with torch.no_grad():
        return {name: to_numpy(getattr(guide, name)).copy() for name in names}


def _copy_params() -> list[torch.Tensor]:
    """The values of every parameter in Pyro's param store (unconstrained), copied."""
    return [p.detach().clone() for _, p in pyro.get_param_store().named_parameters()]


def _restore_params(values: list[torch.Tensor]) -> None:
    """Set the param store's parameters to ``values`` (from :func:`_copy_params`) in place."""
    with torch.no_grad():
        for (_, p), value in zip(pyro.get_param_store().named_parameters(), values, strict=True):
            p.copy_(value)


def _elbo(options: OptimisationOptions, curve: Any) -> Any:
    """The ELBO: Pyro's (compiled with ``jit``), or one that also keeps its likelihood term
    where a training curve records it."""
    kwargs: dict[str, Any] = {"num_particles": options.num_particles, "max_plate_nesting": 1}
    if options.num_particles > 1:
        kwargs["vectorize_particles"] = True
    if options.jit:
        kwargs["ignore_jit_warnings"] = True
    if curve is not None:
        return LikelihoodTraceELBO(options.jit, **kwargs)
    return (JitTrace_ELBO if options.jit else Trace_ELBO)(**kwargs)


def _update(program: Any, guide: Any, elbo: Any, options: OptimisationOptions) -> Any:
    """One SVI update, ``update(x, y, likelihood_scale=...) -> loss``: Pyro's ``SVI.step``
    (``update="pyro"``) or one fused Adam step (:class:`_FusedAdamStep`)."""
    if options.update == "pyro":
        return SVI(program, guide, pyro.optim.Adam({"lr": options.learning_rate}), elbo).step
    return _FusedAdamStep(program, guide, elbo, options.learning_rate)


@dataclass
class _Loop:
    """What the optimisation loop leaves: the loss and likelihood term per step (NaN after a
    non-finite loss stops it), the lowest loss after a step with its parameters (``keep =
    "lowest"``), and when its first step ended (it traces, and with ``jit`` compiles)."""

    losses: np.ndarray
    log_lik: np.ndarray
    lowest: tuple[float, Any] = (np.inf, None)
    first: float = 0.0


def _optimise(step: Callable[[int], float], elbo: Any, guide: Any, names: list[str],
              options: OptimisationOptions, curve: Any, keep_lowest: bool) -> _Loop:  # fmt: skip
    """Run ``step(i)`` for every step, recording the curve's checkpoints."""
    loop = _Loop(np.full(options.num_steps, np.nan), np.full(options.num_steps, np.nan))
    checkpoints = set() if curve is None else set(curve.steps)
    for i in range(options.num_steps):
        if i and not np.isfinite(loop.losses[i - 1]):
            break
        before = _copy_params() if keep_lowest and i else None
        loop.losses[i] = step(i)
        if before is not None and loop.losses[i] <= loop.lowest[0]:
            loop.lowest = loop.losses[i], before
        if i == 0:
            loop.first = now()
        if curve is not None:
            loop.log_lik[i] = elbo.last_log_lik
            if i + 1 in checkpoints:
                if options.GUIDE == "AutoDelta":
                    curve.checkpoint_point(_point_at(guide, names), keep=_copy_params)
                else:
                    curve.checkpoint(*_guide_at(guide, names))
    return loop


def _draw(
    program: Any, guide: Any, target: Target, options: OptimisationOptions, names: list[str]
) -> tuple[dict[str, np.ndarray], dict | None]:
    """``(draws, variational)``: the fitted guide's draws (after the Laplace approximation at
    the mode, for its guide) and, for ``AutoNormal``, its ``loc`` and ``scale`` by site."""
    x, y = target.x, target.y
    if options.GUIDE == "AutoLaplaceApproximation":
        try:
            guide = guide.laplace_approximation(x, y, likelihood_scale=1.0 / options.kl_weight)
        except (RuntimeError, ValueError) as err:  # Cholesky of a non-PD covariance
            raise HessianError(HESSIAN_MESSAGE.format(steps=options.num_steps)) from err
    predictive = Predictive(
        program, guide=guide, num_samples=options.draws, return_sites=names, parallel=True
    )
    with torch.no_grad():
        draws = {k: to_numpy(v) for k, v in predictive(x[:1], y[:1]).items()}
        variational = None
        if options.GUIDE == "AutoNormal":
            variational = dict(zip(("loc", "scale"), _guide_at(guide, names), strict=True))
    return draws, variational


def run(name: str, target: Target, options: OptimisationOptions, seed: int) -> RunOutput:
    """Fit ``options.GUIDE`` by SVI, one Python step at a time (see :class:`_FusedAdamStep`):
    the pieces above build the ELBO and the update, loop, and draw."""
    keep = options.kept_iterate(target.num_data)
    if keep == "validation":
        target = held_out_split(target, seed)
    x, y, program = target.x, target.y, target.program
    batch, scale = options.likelihood_scale(target.num_data)
    schedule = batch_schedule_for(target.num_data, batch, options, seed)
    batches = None if schedule is None else torch.as_tensor(schedule).long()
    names = [site.name for site in target.spec.sites()]
    curve = make_curve(target, options, seed, keep_best=keep == "validation")
    start_values = initial_values(name, target, options, seed)
    values = {k: torch.as_tensor(v) for k, v in start_values.values.items()}
    with pyro_scope(), seeded_torch(child_seed(seed, "svi")):
        guide = guide_class(options.GUIDE)(
            program, init_loc_fn=init_to_value(values=values), **options.guide_kwargs()
        )
        elbo = _elbo(options, curve)
        update = _update(program, guide, elbo, options)

        def step(i: int) -> float:
            if batches is None:
                return update(x, y, likelihood_scale=scale)
            return update(x[batches[i]], y[batches[i]], likelihood_scale=scale)

        # Pyro checks every distribution's arguments and raises on a NaN, and warns of a NaN
        # loss; NumPyro does neither. The optimisation runs unchecked, as NumPyro's, so that a
        # breakdown gives a non-finite loss on both backends and stops the fit the same way,
        # with one error (check_losses).
        with pyro.validation_enabled(False), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Encountered NaN", category=UserWarning)
            start = now()
            # The first step traces the model and guide (and compiles them with JitTrace_ELBO).
            loop = _optimise(step, elbo, guide, names, options, curve, keep == "lowest")
            params = {k: to_numpy(v) for k, v in pyro.get_param_store().named_parameters()}
            check_losses(name, target, options, loop.losses, params)
            kept = {}
            if keep == "lowest":  # the loss after the last step, the one iterate not scored
                final_loss = elbo.loss(program, guide, x, y, likelihood_scale=scale)
                kept["kept_step"] = kept_step(loop.losses, final_loss)
                if kept["kept_step"] < options.num_steps:
                    _restore_params(loop.lowest[1])
            if keep == "validation":
                kept["kept_step"] = curve.best_step
                _restore_params(curve.best)
            evaluated = now()
        learned = {k: to_numpy(v) for k, v in pyro.get_param_store().items()}
        draws, variational = _draw(program, guide, target, options, names)
        drawn = now()
    timings = {
        "compile": loop.first - start,
        "warmup": evaluated - loop.first,
        "sampling": drawn - evaluated,
    }
    info = {
        "elbo": type(elbo).__name__,
        "update": options.update,
        "guide": options.GUIDE,
        "torch_threads": torch.get_num_threads(),
        **learned_prior_info(target, learned),
        **dropout_rates_info(learned),
        **kept,
    }
    if curve is not None:
        timings["warmup"] -= curve.seconds
        timings["curves"] = curve.seconds
        info.update(curve.info(loop.losses, loop.log_lik))
    add_start(timings, info, start_values)
    return finish(name, target, options, loop.losses, draws, timings, variational, info)
