"""Early stopping: map's default keeps the parameters that predict a held-out tenth best."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.engine.contracts import Target
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods.early_stopping import held_out_split
from ppl_bnn.methods.laplace import LaplaceOptions
from ppl_bnn.methods.map_estimate import EARLY_STOPPING_MIN_POINTS as MIN_POINTS
from ppl_bnn.methods.map_estimate import MAPOptions

pytestmark = pytest.mark.runtime(20)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = backend_names()
STEPS = 1500


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A smooth function of 8 inputs plus noise of std 0.3: 250 points overfit 50 tanh units."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    y = np.sin(x[:, 0] + 0.5 * x[:, 1]) + 0.3 * rng.normal(size=n)
    return x, y.astype(np.float32)


@pytest.fixture(scope="module")
def model() -> BNN:
    return BNN(*_data(250, 0), hidden=(50,), activation="tanh", noise="learned")


def test_the_held_out_tenth_is_seeded_and_disjoint(model):
    target = Target.build("numpyro", model)
    split = held_out_split(target, seed=3)
    x_val, y_val = split.validation
    assert (split.num_data, len(y_val)) == (225, 25)
    rows = {tuple(row) for row in np.concatenate([split.model.x, x_val])}
    assert rows == {tuple(row) for row in model.x}  # every point once, on one side
    again = held_out_split(target, seed=3).validation[0]
    np.testing.assert_array_equal(again, x_val)
    assert not np.array_equal(held_out_split(target, seed=4).validation[0], x_val)


def test_a_held_out_set_that_leaves_nothing_to_fit_is_a_clear_error():
    tiny = BNN(*_data(1, 0), hidden=(), noise=0.3)
    with pytest.raises(ValueError, match=r"holds out 1 of 1 training points and leaves none"):
        held_out_split(Target.build("numpyro", tiny), seed=0)


def test_the_default_stops_early_from_min_points():
    assert MAPOptions().kept_iterate(MIN_POINTS) == "validation"
    assert MAPOptions().kept_iterate(MIN_POINTS - 1) == "lowest"
    assert MAPOptions(batch_size=8).kept_iterate(MIN_POINTS - 1) == "last"
    assert MAPOptions(keep="lowest").kept_iterate(10**6) == "lowest"
    assert LaplaceOptions().map_options() == MAPOptions()  # laplace starts from map's fit
    assert LaplaceOptions(keep="lowest").map_options().kept_iterate(10**6) == "lowest"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"keep": "best"}, r"unknown keep 'best' for a MAP fit"),
        ({"keep": "lowest", "batch_size": 8}, r"keep='lowest' needs the full-batch loss"),
        ({"keep": "lowest", "hessian": "full"}, r"keep applies to hessian='ggn' only"),
    ],
)
def test_laplace_checks_its_map_fits_keep(options, match):
    with pytest.raises(ValueError, match=match):
        LaplaceOptions(**options)


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_keeps_the_checkpoint_that_predicts_the_held_out_points_best(model, backend):
    stopped = fit(model, "map", backend=backend, seed=0, num_steps=STEPS)
    curve = stopped.info["early_stopping"]
    assert "training_curve" not in stopped.info  # the report's curves are svi's, on test data
    best = int(np.argmax(curve["held_out_ll"]))
    assert curve["num_held_out"] == 25 and len(curve["step"]) == 50
    assert stopped.info["kept_step"] == curve["kept_step"] == curve["step"][best] < STEPS
    # It stopped early, and the kept draw is those parameters: its log-likelihood on the
    # held-out points is the best.
    split = held_out_split(Target.build(backend, model), seed=0)
    x_val, y_val = split.validation
    kept = stopped.predict(x_val).mean_log_predictive_density(y_val)
    assert kept == pytest.approx(curve["held_out_ll"][best], abs=1e-4)
    # On fresh data from the same function it predicts far better than the mode, whose noise
    # std collapsed onto the training points.
    mode = fit(model, "map", backend=backend, seed=0, num_steps=STEPS, keep="lowest")
    x_test, y_test = _data(1000, 1)
    stopped_ll = stopped.predict(x_test).mean_log_predictive_density(y_test)
    assert stopped_ll > mode.predict(x_test).mean_log_predictive_density(y_test) + 1.0
