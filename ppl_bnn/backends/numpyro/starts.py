r"""A deep ensemble's members as chain starts on NumPyro (``init="ensemble"``, see
:mod:`ppl_bnn.methods.starts`): the members' MAP fits run as one compiled program.

Member :math:`k` starts at its own fan-in-scaled draw (``map``'s ``init_loc="scaled"``) and
takes :data:`START_STEPS` full-batch Adam steps (Kingma & Ba 2015; ``map``'s learning rate) up
the log density of the flat unconstrained vector (:mod:`~ppl_bnn.backends.numpyro.flat`). It
keeps the iterate that ``map`` keeps by default
(:meth:`~ppl_bnn.methods.map_estimate.MAPOptions.kept_iterate`): with enough training points,
the one that predicts a held-out tenth best (:mod:`ppl_bnn.methods.early_stopping`; the same
tenth for every member, so that the data are not copied per member), scored after every step;
otherwise the one of highest log density. An early-stopped member starts its chain where the
network predicts unseen data well rather than at a mode fit to the training noise, which a chain
of a few thousand steps does not leave. The members are ``vmap``-ed: K of them cost about one
full-batch gradient per step and member, without the set-up of K separate ``map`` fits.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.example_libraries import optimizers

from ppl_bnn.backends.numpyro import ops
from ppl_bnn.backends.numpyro.flat import FlatDensity, flat_density
from ppl_bnn.backends.numpyro.programs import compiled
from ppl_bnn.engine.contracts import Target
from ppl_bnn.methods.divergence import diverged
from ppl_bnn.methods.early_stopping import held_out_split
from ppl_bnn.methods.initialisation import scaled_values
from ppl_bnn.methods.map_estimate import MAPOptions
from ppl_bnn.methods.starts import with_predictive_noise
from ppl_bnn.seeding import child_seed
from ppl_bnn.timing import now

#: Adam steps of each member: past where early stopping keeps ``map``'s fits on the UCI sets
#: (steps 100-300 at this learning rate).
START_STEPS = 1000
#: Adam's step size, ``map``'s.
START_LEARNING_RATE = MAPOptions().learning_rate


def _modes(density: FlatDensity, held_out: bool) -> Any:
    """``(starts, data, validation) -> (kept, log_density)``: per member (rows of ``starts``),
    the iterate kept in :data:`START_STEPS` Adam steps on ``data`` (the best on ``validation``
    where ``held_out``, else the one of highest log density) and its log density on ``data``
    (-inf where no finite iterate was kept)."""
    init, update, params_of = optimizers.adam(START_LEARNING_RATE)
    log_joint = ops.log_joint(density.spec)

    def held_out_score(flat, validation):  # log-likelihood of the held-out points
        theta = density.constrained(flat)
        return log_joint(theta, *validation, 2.0) - log_joint(theta, *validation, 1.0)

    def one(start, data, validation):
        value_and_grad = jax.value_and_grad(lambda flat: density.log_density(flat, data))

        def step(carry, i):
            state, kept, kept_score, kept_lp = carry
            flat = params_of(state)
            lp, grad = value_and_grad(flat)
            score = held_out_score(flat, validation) if held_out else lp
            better = jnp.isfinite(lp) & jnp.isfinite(score) & (score > kept_score)
            kept, kept_lp = jnp.where(better, flat, kept), jnp.where(better, lp, kept_lp)
            kept_score = jnp.where(better, score, kept_score)
            grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
            return (update(i, -grad, state), kept, kept_score, kept_lp), None

        worst = jnp.asarray(-jnp.inf, start.dtype)
        carry = (init(start), start, worst, worst)
        (_, kept, _, kept_lp), _ = lax.scan(step, carry, jnp.arange(START_STEPS))
        return kept, kept_lp

    return jax.vmap(one, in_axes=(0, None, None))


def ensemble_starts(
    name: str, target: Target, num_chains: int, seed: int
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The start of each of ``num_chains`` chains: site -> constrained values
    (chains, *site_shape), as many members (see the module docstring) with the noise of their
    ensemble's predictive (:func:`~ppl_bnn.methods.starts.with_predictive_noise`), and what
    they cost and were (``info``: ``start_seconds`` and ``start_compile_seconds`` apart,
    ``num_starts``, ``start_kept`` (``"validation"`` or ``"lowest"``), the members'
    ``start_log_density`` on the points they were fit to, None where not finite,
    ``start_noise_map`` and ``start_noise``). A member that kept no finite iterate is left out,
    so there may be fewer starts; none raises :class:`~ppl_bnn.methods.base.DivergedError`."""
    began = now()
    density = flat_density(target.spec)
    model = target.model
    kept = MAPOptions().kept_iterate(model.num_data)
    fitted, validation = target, (target.x[:1], target.y[:1])  # unused without a held-out set
    if kept == "validation":
        fitted = held_out_split(target, child_seed(seed, f"{name}_start_held_out"))
        x_val, y_val = fitted.validation
        validation = ops.data(target.spec, x_val, y_val)
    inits = [
        density.flatten(scaled_values(model, child_seed(seed, f"{name}_start_member{k}")))
        for k in range(num_chains)
    ]
    args = (jnp.stack(inits), (fitted.x, fitted.y), validation)
    key = ("ensemble_starts", target.spec, kept, START_STEPS, START_LEARNING_RATE)
    compiling = now()
    program = compiled(key, _modes(density, kept == "validation"), *args)
    compile_seconds = now() - compiling
    modes, log_density = program(*args)
    log_density = np.asarray(log_density, dtype=np.float64)
    finite = np.flatnonzero(np.isfinite(log_density))
    if finite.size == 0:
        raise diverged(
            name, "every member of the starting ensemble has a log density that is not finite",
            model, context="before any chain started",
        )  # fmt: skip
    values = jax.vmap(density.constrained)(modes[finite])
    starts = {site: np.asarray(v) for site, v in values.items()}
    info: dict[str, Any] = {
        "num_starts": int(finite.size),
        "start_kept": kept,
        "start_log_density": [round(v, 3) if np.isfinite(v) else None for v in log_density],
    }
    starts, noise = with_predictive_noise(target, starts)
    info.update(noise, start_seconds=now() - began - compile_seconds)
    info["start_compile_seconds"] = compile_seconds
    return starts, info


def start_seconds(info: dict[str, Any]) -> tuple[float, float]:
    """The warm-up and compile seconds that making the starts took, taken out of their ``info``
    (0 for chains that did not start from an ensemble): the ensemble is part of the chains'
    warm-up, its compilation part of their compile time."""
    return info.pop("start_seconds", 0.0), info.pop("start_compile_seconds", 0.0)
