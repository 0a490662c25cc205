"""Sites laid end to end in one flat vector, and back."""

from __future__ import annotations

import numpy as np

from ppl_bnn.model.flat import FlatLayout
from tests.backends.test_parity import _model


def test_layout_round_trip():
    model = _model((5, 4), "gelu", {"noise": "learned"})
    layout = FlatLayout.of(model.spec)
    params = {k: np.stack([v, v + 1]) for k, v in model.init_params(0).items()}
    flat = layout.flatten(params)
    assert flat.shape == (2, layout.size)
    assert layout.size == sum(np.prod(s.shape, dtype=int) for s in model.spec.sites())
    for name, value in layout.unflatten(flat).items():
        np.testing.assert_array_equal(value, params[name].astype(np.float32))
