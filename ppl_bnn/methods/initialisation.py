r"""Where a guide-based fit starts: one dict of site values, the same on both backends.

Every autoguide fit starts its guide's location at these values (each library's
``init_to_value``), so that for the same seed both backends start from identical means.
``init_loc`` says how they are made:

- ``"uniform"``: :math:`z \sim U(-2, 2)` elementwise in unconstrained space (each library's
  ``init_to_uniform`` semantics), :math:`\theta = T(z)`;
- ``"prior"``: one draw from the prior (:meth:`ppl_bnn.BNN.init_params`; ``init_to_sample``);
- ``"map"``: the mode found by a short MAP fit (``init_map_steps`` Adam steps of the ``map``
  method on the same backend, with the fit's learning rate, batch size and KL weight): a warm
  start near a trained network. The MAP fit itself starts where networks are usually trained
  from, a fan-in-scaled draw (LeCun et al. 1998): :math:`w \sim \mathcal N(0, 1/d_\text{in})`
  for each weight of a layer with :math:`d_\text{in}` inputs, biases 0, positive sites 1. A
  U(-2, 2) start puts a layer with many inputs (MNIST's 784) deep in saturation, where a short
  MAP fit does not get out.

The guide's scales start at ``init_scale`` whatever the means.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods import map_estimate
from ppl_bnn.methods.base import DivergedError
from ppl_bnn.methods.optimisation import GaussianGuideOptions, check_init_loc
from ppl_bnn.model.bnn import BNN
from ppl_bnn.seeding import child_seed, numpy_generator

logger = logging.getLogger(__name__)

#: Half-width of the uniform start in unconstrained space (Pyro's and NumPyro's ``radius``).
UNIFORM_RADIUS = 2.0


def scaled_values(model: BNN, seed: int) -> dict[str, np.ndarray]:
    r"""A fan-in-scaled start: each weight site of shape (..., d_out) drawn from
    :math:`\mathcal N(0, 1/d_\text{in})`, :math:`d_\text{in}` the product of all but its last
    dimension; vector and scalar sites (biases, the noise precision) 0 in unconstrained space."""
    rng = numpy_generator(seed, "init_scaled")
    values = {}
    for site in model.spec.sites():
        if len(site.shape) >= 2:
            z = rng.normal(0.0, 1.0 / math.sqrt(math.prod(site.shape[:-1])), size=site.shape)
        else:
            z = np.zeros(site.shape)
        values[site.name] = np.asarray(np.exp(z) if site.positive else z, dtype=np.float32)
    return values


def uniform_values(model: BNN, seed: int) -> dict[str, np.ndarray]:
    r""":math:`\theta = T(z)`, :math:`z \sim U(-2, 2)` per element (``exp`` on positive sites)."""
    rng = numpy_generator(seed, "init_uniform")
    values = {}
    for site in model.spec.sites():
        z = rng.uniform(-UNIFORM_RADIUS, UNIFORM_RADIUS, size=site.shape)
        values[site.name] = np.asarray(np.exp(z) if site.positive else z, dtype=np.float32)
    return values


#: The starts drawn from a seed alone, without fitting anything.
SEEDED = ("scaled", "uniform", "prior")


def seeded_values(model: BNN, how: str, seed: int) -> dict[str, np.ndarray]:
    """``model``'s site values (constrained) drawn from ``seed`` as ``how`` (one of
    :data:`SEEDED`) says: :func:`scaled_values`, :func:`uniform_values` or a prior draw."""
    if how == "scaled":
        return scaled_values(model, seed)
    if how == "uniform":
        return uniform_values(model, seed)
    if how == "prior":
        return model.init_params(seed)
    raise ValueError(f"unknown seeded start {how!r}; available: {', '.join(SEEDED)}")


@dataclass
class Start:
    """Initial site values (constrained), and what making them cost and recorded."""

    values: dict[str, np.ndarray]
    info: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def initial_values(name: str, target: Target, options: Any, seed: int) -> Start:
    """The start of ``name``'s guide: by ``options.init_loc`` where the options have one
    (``"scaled"`` for ``map`` and the fits built on it: :func:`scaled_values`), else uniform
    (``laplace`` with ``hessian="full"``).

    Seeds are child seeds of ``seed`` (``"init_loc"``; ``"init_map"`` for the MAP fit)."""
    how = getattr(options, "init_loc", "uniform")
    if how in SEEDED:
        values = seeded_values(target.model, how, child_seed(seed, "init_loc"))
        return Start(values, {"init_loc": how})
    check_init_loc(how)
    return _map_start(name, target, options, child_seed(seed, "init_map"))


def _map_start(name: str, target: Target, options: GaussianGuideOptions, seed: int) -> Start:
    """The mode of a short ``map`` fit with ``options``' optimiser settings."""
    map_options = map_estimate.MAPOptions(
        num_steps=options.init_map_steps,
        learning_rate=options.learning_rate,
        num_particles=1,
        jit=options.jit,
        update=options.update,
        batch_size=options.batch_size,
        kl_weight=options.kl_weight,
    )
    run = map_estimate.METHOD.run_on(target.backend)
    try:
        out = run(name, target, map_options, seed)
    except DivergedError as err:  # the fit's own breakdown, at a step of its warm start
        details = {"method": err.method, "step": err.step, "sites": err.sites, "cause": err.cause}
        raise DivergedError(f"{err} (in the MAP warm start of init_loc='map')", **details) from err
    values = {k: np.asarray(v[0, 0], dtype=np.float32) for k, v in out.draws.items()}
    losses = np.asarray(out.losses)
    logger.debug("%s: MAP start after %d steps, loss %.4g", name, losses.size, losses[-1])
    info = {
        "init_loc": "map",
        "init_map_steps": options.init_map_steps,
        "init_map_loss": float(losses[-1]),
    }
    return Start(values, info, dict(out.timings))


def add_start(timings: dict[str, float], info: dict[str, Any], start: Start) -> None:
    """Record ``start`` in a fit's ``info``, and the cost of making it in its ``timings``: a
    MAP start's compilation as compilation, the rest of it as warmup, which
    ``info["init_map_seconds"]`` also holds, so that the fit's own steps can be timed apart."""
    info.update(start.info)
    if start.timings:
        rest = sum(v for k, v in start.timings.items() if k != "compile")
        timings["compile"] += start.timings.get("compile", 0.0)
        timings["warmup"] += rest
        info["init_map_seconds"] = rest
