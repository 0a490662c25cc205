"""One rule for numerical breakdowns, shared by every method on every backend.

A non-finite loss, draw, step or log density stops a method. Where nothing usable is left (an
optimisation whose loss became non-finite, SG-MCMC chains that diverged before their first kept
draw, an ensemble whose every member diverged, a sampler that finds no finite starting point) it
raises :class:`~ppl_bnn.methods.base.DivergedError`. Where finite draws remain (SG-MCMC draws
before the divergence, the ensemble members that stayed finite) it returns them, and ``info``
says so: ``diverged`` (True), ``diverged_at_step`` (one entry per chain or member, None for
those that did not diverge), ``diverged_sites`` and ``diverged_cause``. A result never holds a
non-finite draw.

Both backends' drivers build their errors and ``info`` here, so the same breakdown reads the
same on Pyro and NumPyro: the same exception type, the same message shape (method, what became
non-finite, step, sites, likely cause) and the same ``info`` keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppl_bnn.methods.base import DivergedError
from ppl_bnn.model.bnn import BNN

#: Data of larger magnitude is named as the likely cause: standardised data stays far below it.
LARGE_DATA = 1e3


def magnitude(value: float) -> str:
    """``1e30`` for 1e30, ``3e3`` for 2718: the order of magnitude, written compactly."""
    return f"{value:.0e}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def likely_cause(model: BNN, step_option: tuple[str, float] | None = None) -> str:
    """The likely cause of a breakdown of a fit of ``model``, in words.

    Extreme data comes first (a step size cannot tame inputs of magnitude 1e30); otherwise the
    method's step-size option (``("learning_rate", 0.01)``, ``("step_size", 1e-4)``) when given.
    """
    data = [("x", model.x, "inputs")]
    if model.spec.likelihood == "gaussian":  # class labels are no magnitudes
        data.append(("y", model.y, "targets"))
    for name, values, what in data:
        largest = float(np.max(np.abs(values)))
        if largest >= LARGE_DATA:
            return f"{what} of magnitude {magnitude(largest)} in {name}: standardise them"
    if step_option is not None:
        option, value = step_option
        return f"{option.replace('_', ' ')} too large ({option}={value:g}): try a smaller {option}"
    return "the log density is not finite there: check the data, the priors and the noise"


def nonfinite_sites(arrays: Mapping[str, Any], model: BNN) -> list[str]:
    """The model's sites (in model order) whose arrays hold a non-finite value.

    ``arrays`` is keyed by site name or by any name holding a site name as a ``.``- or
    ``_``-separated token (``w0_auto_loc``, ``AutoNormal.locs.w0``); names of no single site
    (``auto_loc`` of a multivariate guide) are left out: their site is not known.
    """
    bad = set()
    for key, value in arrays.items():
        if not np.all(np.isfinite(np.asarray(value))):
            bad.update(re.split(r"[._]", key))
    return [site.name for site in model.spec.sites() if site.name in bad]


def _steps_text(step: int | Sequence[int | None] | None) -> str:
    if step is None:
        return ""
    if isinstance(step, int):
        return f" at step {step}"
    steps = [s for s in step if s is not None]
    return f" at step {steps[0]}" if len(steps) == 1 else f" at steps {steps}"


def diverged(
    method: str,
    what: str,
    model: BNN,
    *,
    step: int | list[int | None] | None = None,
    sites: Sequence[str] = (),
    step_option: tuple[str, float] | None = None,
    context: str = "",
) -> DivergedError:
    """The :class:`DivergedError` of ``method``: ``what`` became non-finite ``at step``, in
    ``sites``, ``context`` (e.g. "before any draw was kept"), with the likely cause."""
    cause = likely_cause(model, step_option)
    where = f" in site(s) {', '.join(sites)}" if sites else ""
    message = (
        f"{method.upper()} diverged{_steps_text(step)}{where}: {what}"
        f"{' ' + context if context else ''}; likely cause: {cause}"
    )
    return DivergedError(message, method=method, step=step, sites=sites, cause=cause)


def check_finite_draws(method: str, draws: Mapping[str, np.ndarray], model: BNN) -> None:
    """:class:`DivergedError` naming the sites when any draw is not finite."""
    sites = nonfinite_sites(draws, model)
    if sites:
        raise diverged(method, "the draws are not finite", model, sites=sites)
