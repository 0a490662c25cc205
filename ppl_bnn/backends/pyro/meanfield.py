"""The ``meanfield`` driver on Pyro: mean-field VI by a chosen gradient estimator (see
:mod:`ppl_bnn.methods.meanfield`), one fused torch Adam step over every guide parameter."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyro
import torch
from pyro import poutine

from ppl_bnn.backends.pyro.device import generator, to_numpy
from ppl_bnn.backends.pyro.ops import PPL_PYRO
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.base import RunOutput
from ppl_bnn.methods.curves import make_curve
from ppl_bnn.methods.meanfield import (
    finish_meanfield,
    guide_params,
    initial_guide,
    inverse_softplus,
    particle_terms,
)
from ppl_bnn.methods.optimisation import GaussianGuideOptions, batch_schedule_for, check_losses
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now


class GeneratorNoise:
    """Random numbers from a seeded ``torch.Generator`` (never torch's global one)."""

    def __init__(self, seed: int) -> None:
        self.generator = generator(seed)

    def normal(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator)

    def rademacher(self, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(0, 2, shape, generator=self.generator).mul_(2).sub_(1).float()


def observe_fn(program: Callable[..., Any]) -> Callable[..., Any]:
    """The program's scaled log-likelihood of ``y`` (see :data:`~ppl_bnn.methods.meanfield.
    Observe`), from Pyro's trace of it with the sites conditioned."""

    def observe(values: Mapping[str, Any], network: Callable, x: Any, y: Any, scale: float) -> Any:
        model = poutine.condition(program, data=dict(values))
        trace = poutine.trace(model).get_trace(x, y, likelihood_scale=scale, network=network)
        trace.compute_log_prob(site_filter=lambda name, site: name == "y")
        return trace.nodes["y"]["log_prob_sum"]

    return observe


def loss_terms_fn(target: Target, options: GaussianGuideOptions) -> Callable[..., Any]:
    """``(loc, rho, noise, x, y, likelihood_scale) -> (loss, log_lik)``: the negative ELBO and
    its scaled log-likelihood term, averaged over ``options.num_particles`` draws, for the guide
    with means ``loc`` and stds ``softplus(rho)`` (dicts of tensors by site)."""
    particles = particle_terms(target, options, observe_fn(target.program), PPL_PYRO, torch)

    def terms(loc, rho, noise, x, y, likelihood_scale):
        scale = {k: torch.nn.functional.softplus(v) for k, v in rho.items()}
        return particles(loc, scale, noise, x, y, likelihood_scale)

    return terms


def loss_fn(target: Target, options: GaussianGuideOptions) -> Callable[..., torch.Tensor]:
    """``(loc, rho, noise, x, y, likelihood_scale) -> loss``: :func:`loss_terms_fn`'s loss."""
    terms = loss_terms_fn(target, options)
    return lambda *args: terms(*args)[0]


def _guide_at(loc: dict, rho: dict) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The guide's ``(loc, scale)`` by site, as numpy arrays."""
    with torch.no_grad():
        return (
            {k: to_numpy(v).copy() for k, v in loc.items()},
            {k: to_numpy(torch.nn.functional.softplus(v)).copy() for k, v in rho.items()},
        )


def run(name: str, target: Target, options: GaussianGuideOptions, seed: int) -> RunOutput:
    """Fit the mean-field guide by ``options.estimator``, one fused Adam step at a time."""
    x, y = target.x, target.y
    batch, scale = options.likelihood_scale(target.num_data)
    schedule = batch_schedule_for(target.num_data, batch, options, seed)
    batches = None if schedule is None else torch.as_tensor(schedule).long()
    loc0, std0, init = initial_guide(name, target, options, seed)
    loc = {k: torch.tensor(v, requires_grad=True) for k, v in loc0.items()}
    rho = {k: torch.tensor(inverse_softplus(v), requires_grad=True) for k, v in std0.items()}
    adam = torch.optim.Adam([*loc.values(), *rho.values()], lr=options.learning_rate, foreach=True)
    terms = loss_terms_fn(target, options)
    noise = GeneratorNoise(child_seed(seed, "svi"))
    curve = make_curve(target, options, seed)
    checkpoints = set() if curve is None else set(curve.steps)
    losses = np.full(options.num_steps, np.nan)
    log_lik = np.full(options.num_steps, np.nan)

    def step(i: int) -> None:
        xb, yb = (x, y) if batches is None else (x[batches[i]], y[batches[i]])
        value, ll = terms(loc, rho, noise, xb, yb, scale)
        value.backward()
        adam.step()
        adam.zero_grad(set_to_none=True)
        losses[i], log_lik[i] = float(value.detach()), float(ll.detach())

    # Unchecked, as in the autoguide driver: a breakdown gives a non-finite loss, which stops
    # the fit with the same error on both backends (check_losses).
    with pyro.validation_enabled(False), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Encountered NaN", category=UserWarning)
        start = now()
        for i in range(options.num_steps):
            if i and not np.isfinite(losses[i - 1]):
                break
            step(i)
            if i == 0:
                first = now()
            if i + 1 in checkpoints:
                curve.checkpoint(*_guide_at(loc, rho))  # type: ignore[union-attr]
        end = now()
    fitted_loc, fitted_std = _guide_at(loc, rho)
    check_losses(name, target, options, losses, guide_params(fitted_loc, fitted_std))
    timings = {"compile": first - start, "warmup": end - first}
    info: dict[str, Any] = {"update": "fused", "torch_threads": torch.get_num_threads()}
    if curve is not None:
        timings["warmup"] -= curve.seconds
        timings["curves"] = curve.seconds
        info.update(curve.info(losses, log_lik))
    out = finish_meanfield(
        name, target, options, seed, losses, (fitted_loc, fitted_std), timings, info, init
    )
    out.timings["sampling"] = now() - end
    return out
