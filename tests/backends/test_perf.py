"""The backends' perf modules: the bare torch potential is the Pyro model's, and each floor
returns one cost per repeat of what it was asked for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppl_bnn import BNN
from ppl_bnn.backends.pyro import ops as pyro_ops
from ppl_bnn.backends.pyro import perf as pyro_perf
from ppl_bnn.backends.pyro.potential import FlatPotential
from ppl_bnn.bench.perf_suite import perf_backends, perf_module
from ppl_bnn.engine.perf import plain_step_batches
from ppl_bnn.priors import ScaleMixture
from tests.backends.test_parity import CASES, _model


@pytest.mark.parametrize(("hidden", "activation", "kwargs"), CASES)
def test_bare_torch_potential_equals_the_pyro_models(hidden, activation, kwargs):
    model = _model(hidden, activation, kwargs)
    x, y = pyro_ops.data(model.spec, model.x, model.y)
    reference = FlatPotential(model.spec, x, y, mode="eager")
    bare = pyro_perf.bare_torch_energy(model.spec)
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
    bare = pyro_perf.bare_torch_energy(model.spec)
    for _ in range(3):
        z = torch.tensor(rng.uniform(-2, 2, reference.size).astype(np.float32))
        np.testing.assert_allclose(
            float(bare(z, x, y)), float(reference.energy(z, x, y)), rtol=2e-5
        )


def _positive(costs: dict[str, list[float]], repeats: int) -> bool:
    return all(len(v) == repeats and all(0 < c < 1 for c in v) for v in costs.values())


@pytest.mark.parametrize("backend", perf_backends())
def test_each_backends_floors_give_one_cost_per_repeat(backend: str) -> None:
    perf = perf_module(backend)
    model = _model((4,), "tanh", {"noise": "learned"})
    variants = perf.SCALING_VARIANTS[:1]
    costs, _ = perf.gradient_costs(model, calls=5, repeats=2, variants=variants)
    assert set(costs) == set(variants) and _positive(costs, 2)
    kernels = perf.kernel_costs(10, draws=5, repeats=2)
    assert _positive(kernels, 2)
    assert set(perf.SCALING_VARIANTS) <= set(perf.GRADIENT_VARIANTS)
    assert set(perf.REFERENCE_PATHS.values()) <= {p for paths in perf.PATHS.values() for p in paths}


@pytest.mark.parametrize("backend", perf_backends())
def test_each_backends_plain_step_trains_on_the_images(backend: str) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 8, 8, 1)).astype(np.float32), rng.integers(0, 10, 16)
    run, first = perf_module(backend).plain_step(x, y, batch_size=4, steps=2)
    assert first > 0 and run() > 0
    assert plain_step_batches(16, 4, 3).shape == (3, 4)


def test_pyro_times_only_the_gradients_asked_for():
    model = _model((4,), "tanh", {"noise": "learned"})
    costs, compiles = pyro_perf.gradient_costs(
        model, calls=3, repeats=2, variants=("bare_eager", "pyro_traced")
    )
    assert set(costs) == {"bare_eager", "pyro_traced"} and compiles == {}
    assert _positive(costs, 2)
    assert set(pyro_perf.kernel_costs(6, draws=3, repeats=1)) == {"nuts", "hmc"}
