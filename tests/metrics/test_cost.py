"""Cost metrics by hand."""

from __future__ import annotations

from ppl_bnn import metrics


def test_cost_metrics() -> None:
    assert metrics.cost_metrics(seconds=4.0, ess=200.0, num_grads=8000.0) == {
        "ess_per_s": 50.0,
        "ess_per_1000_grads": 25.0,
        "s_per_grad": 0.0005,
    }
    assert metrics.cost_metrics(seconds=4.0) == {}
    assert metrics.cost_metrics(seconds=0.0, ess=10.0, num_grads=100.0) == {
        "ess_per_1000_grads": 100.0
    }
    assert metrics.cost_metrics(seconds=2.0, ess=10.0, num_grads=0) == {"ess_per_s": 5.0}
