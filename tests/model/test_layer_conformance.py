"""Every layer of ``LAYERS``, with its own ``examples()``, on every registered backend: its dict
form reads back, its parameters are the spec's sites, and a network that starts with it runs
forward to the shapes the layer states, the same on every backend. A new layer passes these
with no test edited."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN
from ppl_bnn.engine.registry import backend_names, get_backend
from ppl_bnn.model.layers import LAYERS, Dense, Flatten, layer_from_dict

EXAMPLES = [(kind, layer, shape) for kind, cls in LAYERS.items() for layer, shape in cls.examples()]
IDS = [f"{kind}-{i}" for i, (kind, _, _) in enumerate(EXAMPLES)]
POINTS = 5


def _network(layer, shape: tuple[int, ...]) -> BNN:
    """A regression network: ``layer`` on inputs of ``shape``, flattened where it gives
    images, then one output."""
    rng = np.random.default_rng(0)
    layers = [layer, *([Flatten()] if len(layer.output_shape(shape)) == 3 else []), Dense(1)]
    x, y = rng.normal(size=(POINTS, *shape)), rng.normal(size=POINTS)
    return BNN(x, y, layers=layers, noise=0.5)


def _draws(model: BNN, num: int = 2) -> dict[str, np.ndarray]:
    draws = [model.init_params(seed=s) for s in range(num)]
    return {k: np.stack([d[k] for d in draws]) for k in draws[0]}


@pytest.mark.parametrize(("kind", "layer", "shape"), EXAMPLES, ids=IDS)
def test_dict_form_reads_back(kind, layer, shape):
    assert LAYERS[kind] is type(layer)
    assert layer.to_dict()["kind"] == kind
    assert layer_from_dict(layer.to_dict()) == layer


@pytest.mark.parametrize(("kind", "layer", "shape"), EXAMPLES, ids=IDS)
def test_its_parameters_are_the_specs_sites(kind, layer, shape):
    model = _network(layer, shape)
    shapes = layer.param_shapes(shape)
    assert set(layer.param_dims(0)) == set(shapes)
    first = dict(model.spec.layer_params[0][1]) if shapes else {}
    sites = {s.name: s.shape for s in model.spec.sites()}
    assert {kind_: sites[name] for kind_, name in first.items()} == shapes


@pytest.mark.parametrize(("kind", "layer", "shape"), EXAMPLES, ids=IDS)
def test_forward_runs_to_its_shapes_alike_on_every_backend(kind, layer, shape):
    model = _network(layer, shape)
    draws = _draws(model)
    outputs = {b: get_backend(b).forward_draws(model.spec, draws, model.x) for b in backend_names()}
    first = next(iter(outputs.values()))
    assert first.shape == (2, POINTS, 1) and np.all(np.isfinite(first))
    assert np.ptp(first) > 0  # the draws and the inputs move the output
    for backend, f in outputs.items():
        # float32 on sums of tens of terms of order 1.
        np.testing.assert_allclose(f, first, rtol=1e-4, atol=1e-5, err_msg=backend)
