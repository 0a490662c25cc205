"""Where a shared method's runs may be intercepted: the interceptor makes them, a run it hands
back is counted in ``fit``'s cost, and outside an interception they simply run."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.methods import shared

OPTIONS = {"num_steps": 50, "keep": "lowest"}


@pytest.fixture(scope="module")
def model() -> BNN:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 1))
    return BNN(x, np.sin(x[:, 0]), hidden=[4])


def test_a_shared_run_goes_through_the_interceptor_and_fit_counts_what_it_handed_back(model):
    calls = []

    def interceptor(method, run, name, target, options, seed):
        calls.append((method, name, seed))
        shared.record_reused({"key": "k", "method": method, "seconds": 7.0})
        return run(name, target, options, seed)

    with shared.intercept(interceptor):
        result = fit(model, "map", seed=1, **OPTIONS)
    assert calls == [("map", "map", 1)]
    assert result.info["shared_fits"] == [{"key": "k", "method": "map", "seconds": 7.0}]
    assert result.timings["shared"] == 7.0
    assert result.timings["total"] >= 7.0


def test_outside_an_interception_a_shared_run_runs(model):
    result = fit(model, "map", seed=1, **OPTIONS)
    assert "shared_fits" not in result.info and "shared" not in result.timings


def test_runs_handed_back_reach_every_enclosing_collection():
    with shared.collect() as outer:
        with shared.collect() as inner:
            shared.record_reused({"key": "a", "method": "map", "seconds": 1.0})
        shared.record_reused({"key": "b", "method": "map", "seconds": 2.0})
    assert [r["key"] for r in inner] == ["a"]
    assert [r["key"] for r in outer] == ["a", "b"]
