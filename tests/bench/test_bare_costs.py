"""The bare costs measure the same potential as the models' own, and return one cost per
repeat."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppl_bnn import BNN
from ppl_bnn.backends.pyro import ops as pyro_ops
from ppl_bnn.backends.pyro.potential import FlatPotential
from ppl_bnn.bench import bare_costs
from ppl_bnn.priors import ScaleMixture
from tests.backends.test_parity import CASES, _model


@pytest.mark.parametrize(("hidden", "activation", "kwargs"), CASES)
def test_bare_torch_potential_equals_the_pyro_models(hidden, activation, kwargs):
    model = _model(hidden, activation, kwargs)
    x, y = pyro_ops.data(model.spec, model.x, model.y)
    reference = FlatPotential(model.spec, x, y, mode="eager")
    bare = bare_costs.bare_torch_energy(model.spec)
    rng = np.random.default_rng(0)
    for _ in range(3):
        z = torch.tensor(rng.uniform(-2, 2, reference.size).astype(np.float32))
        np.testing.assert_allclose(
            float(bare(z, x, y)), float(reference.energy(z, x, y)), rtol=2e-5
        )


def test_bare_torch_potential_equals_the_pyro_models_with_a_scale_mixture():
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    prior = [ScaleMixture(0.2, 1.0, 0.1), ScaleMixture(0.6, 0.05, 2.0)]
    model = BNN(x, y, hidden=(4,), noise="learned", prior=prior)
    x, y = pyro_ops.data(model.spec, model.x, model.y)
    reference = FlatPotential(model.spec, x, y, mode="eager")
    bare = bare_costs.bare_torch_energy(model.spec)
    for _ in range(3):
        z = torch.tensor(rng.uniform(-2, 2, reference.size).astype(np.float32))
        np.testing.assert_allclose(
            float(bare(z, x, y)), float(reference.energy(z, x, y)), rtol=2e-5
        )


def test_bare_costs_are_positive_per_repeat():
    model = _model((4,), "tanh", {"noise": "learned"})
    jax_costs = bare_costs.jax_gradient(model, calls=50, repeats=2)
    kernel = bare_costs.pyro_kernel(10, kernel="hmc", draws=5, repeats=2)
    for costs in (jax_costs, kernel):
        assert len(costs) == 2 and all(0 < c < 1 for c in costs)


def test_torch_gradients_times_only_the_variants_asked_for():
    model = _model((4,), "tanh", {"noise": "learned"})
    costs = bare_costs.torch_gradients(
        model, calls=3, repeats=2, variants=("bare_eager", "pyro_traced")
    )
    compile_s = costs.pop("pyro_compile_s")
    assert set(costs) == {"bare_eager", "pyro_traced"}
    assert np.isnan(compile_s).all()
    assert all(len(v) == 2 and all(0 < c < 1 for c in v) for v in costs.values())
