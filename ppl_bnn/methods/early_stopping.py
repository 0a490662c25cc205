r"""Early stopping: a point estimate kept where it predicts held-out data best.

A posterior mode of a network with a learned noise fits the training noise on a small data set:
the noise std collapses far below the test error and the predictive is over-confident, worse
than a constant on the small UCI sets (``benchmarks/defaults_audit.py --option
map.keep=lowest``).
The field's answer (Prechelt 1998; the UCI protocols of Hernández-Lobato & Adams 2015 and Gal &
Ghahramani 2016 choose the number of epochs on held-out data) is to stop where held-out data
are predicted best.

With ``keep="validation"`` a ``map`` fit holds out :data:`HELD_OUT_FRACTION` of its training
points (at most :data:`~ppl_bnn.methods.curves.MAX_HELD_OUT`, chosen by the fit's child seed
``"early_stopping"``), optimises on the rest, scores the held-out mean log predictive density
:math:`\frac1{N_v}\sum_n \log p(y_n \mid x_n, \hat\theta_t)` at
:data:`~ppl_bnn.methods.curves.CURVE_POINTS` checkpoints, and keeps the parameters of the best
(:class:`~ppl_bnn.methods.curves.TrainingCurve` with ``keep_best``). It is not refitted on the
held-out points. Below :data:`~ppl_bnn.methods.map_estimate.EARLY_STOPPING_MIN_POINTS`
training points a held-out set is too small to score and ``keep=None`` keeps the lowest loss
instead (:meth:`~ppl_bnn.methods.map_estimate.MAPOptions.kept_iterate`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import get_backend
from ppl_bnn.methods.curves import MAX_HELD_OUT
from ppl_bnn.model.bnn import BNN
from ppl_bnn.seeding import numpy_generator

#: Fraction of the training points held out to choose the stopping step.
HELD_OUT_FRACTION = 0.1


def held_out_split(target: Target, seed: int) -> Target:
    """``target`` (its program kept: ``mcdropout``'s trains with masks) on its training points
    less a seeded held-out set, which becomes its ``validation``: :data:`HELD_OUT_FRACTION`
    of them (at least 1, at most :data:`~ppl_bnn.methods.curves.MAX_HELD_OUT`)."""
    model = target.model
    n = model.num_data
    held = min(MAX_HELD_OUT, max(1, round(HELD_OUT_FRACTION * n)))
    if held >= n:
        raise ValueError(
            f"early stopping holds out {held} of {n} training points and leaves none to fit: "
            "give keep='lowest' or keep='last'"
        )
    order = numpy_generator(seed, "early_stopping").permutation(n)
    val, train = np.sort(order[:held]), np.sort(order[held:])
    fitted = BNN.from_spec(model.spec, model.x[train], model.y[train])
    x, y = get_backend(target.backend).data(model.spec, fitted.x, fitted.y)
    return replace(target, model=fitted, x=x, y=y, validation=(model.x[val], model.y[val]))
