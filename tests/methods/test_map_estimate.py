"""map's mode: the iterate of lowest loss on the full batch, the last one otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import fit
from ppl_bnn.engine.registry import backend_names, get_backend
from ppl_bnn.methods.map_estimate import MAPOptions
from ppl_bnn.methods.mcdropout import MCDropoutOptions
from ppl_bnn.methods.optimisation import kept_step
from tests.closed_form import linear_problem

pytestmark = pytest.mark.runtime(10)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = backend_names()

# Adam at this step size circles the mode of the linear posterior instead of settling: its
# loss rises and falls, so the last iterate is not the lowest.
OVERSHOOT = {"num_steps": 60, "learning_rate": 0.5}


@pytest.fixture(scope="module")
def problem():
    return linear_problem(correlation=0.9)


def _neg_log_joint(result, problem, backend: str) -> float:
    ops = get_backend(backend)
    spec = problem.model.spec
    x, y = ops.data(spec, problem.model.x, problem.model.y)
    params = {name: value[0, 0] for name, value in result.draws.items()}
    return -ops.log_density(spec, x, y, params)


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_keeps_the_iterate_of_lowest_loss(problem, backend):
    lowest = fit(problem.model, "map", backend=backend, seed=0, **OVERSHOOT)
    last = fit(problem.model, "map", backend=backend, seed=0, keep="last", **OVERSHOOT)
    losses = np.asarray(lowest.losses)
    np.testing.assert_array_equal(losses, last.losses)  # the same path, another iterate kept
    step = lowest.info["kept_step"]
    assert 1 <= step < OVERSHOOT["num_steps"], "the overshooting fit should not end at its lowest"
    assert "kept_step" not in last.info
    # The kept draw is the parameters whose loss (taken before step ``step``'s update) was the
    # lowest after the first step, and it lies higher on the log joint than the last iterate.
    kept = _neg_log_joint(lowest, problem, backend)
    np.testing.assert_allclose(kept, losses[step], rtol=1e-5)
    assert kept == pytest.approx(losses[1:].min(), rel=1e-5)
    assert kept < _neg_log_joint(last, problem, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_descending_map_fit_keeps_its_last_iterate(problem, backend):
    options = {"num_steps": 300, "learning_rate": 0.01}
    lowest = fit(problem.model, "map", backend=backend, seed=0, **options)
    last = fit(problem.model, "map", backend=backend, seed=0, keep="last", **options)
    assert lowest.info["kept_step"] == options["num_steps"]
    for name, value in lowest.draws.items():
        np.testing.assert_array_equal(value, last.draws[name])


@pytest.mark.parametrize("backend", BACKENDS)
def test_minibatch_map_keeps_its_last_iterate(problem, backend):
    result = fit(problem.model, "map", backend=backend, seed=0, num_steps=20, batch_size=10)
    assert "kept_step" not in result.info


def test_kept_step_takes_the_lowest_loss_after_a_step_and_ties_to_the_later():
    # losses[i]: the loss after i steps; the final loss: after the last step.
    assert kept_step(np.array([5.0, 4.0, 3.0, 2.0]), 1.0) == 4
    assert kept_step(np.array([5.0, 1.0, 3.0, 2.0]), 4.0) == 1
    assert kept_step(np.array([5.0, 1.0, 3.0, 1.0]), 4.0) == 3
    assert kept_step(np.array([5.0, 4.0, 3.0, 2.0]), 2.0) == 4
    assert kept_step(np.array([0.0, 4.0]), 3.0) == 2  # the start is not a candidate


def test_dropout_training_keeps_the_last_iterate_or_stops_early():
    # Below 200 training points, where map keeps its lowest loss; from 200 it stops early.
    assert MCDropoutOptions(dropout_rate=0.1).map_options(50).keep == "last"
    assert MCDropoutOptions().map_options(50).keep == "last"
    assert MCDropoutOptions(concrete=True).map_options(50).keep == "last"
    assert MCDropoutOptions(dropout_rate=0.0).map_options(50).kept_iterate(50) == "lowest"
    assert MCDropoutOptions().map_options(200).kept_iterate(200) == "validation"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"keep": "best"}, r"unknown keep .best. for a MAP fit; available: validation, lowest"),
        ({"keep": "lowest", "batch_size": 8}, r"keep='lowest' needs the full-batch loss"),
    ],
)
def test_bad_keep_is_a_clear_error(options, match):
    with pytest.raises(ValueError, match=match):
        MAPOptions(**options)


def test_lowest_iterate_with_dropout_masks_is_a_clear_error():
    with pytest.raises(ValueError, match=r"keep='lowest' needs a loss without noise: dropout"):
        MCDropoutOptions(dropout_rate=0.1, keep="lowest")
