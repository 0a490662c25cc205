"""The Pyro HMC driver's per-draw statistics, recovered from Pyro's running means."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ppl_bnn.backends.pyro.hmc import _CountingPotential, _PyroRecorder


def _kernel(mean_accept: float) -> SimpleNamespace:
    return SimpleNamespace(
        _mean_accept_prob=mean_accept,
        step_size=0.1,
        _potential_energy_last=torch.tensor(1.0),
        _divergences=[],
    )


@pytest.mark.parametrize(
    ("means", "expected"),
    [
        # Exact running means of (0.5, 1.0, 0.25).
        ((0.5, 0.75, 0.5833333333333334), (0.5, 1.0, 0.25)),
        # Running means whose rounding carries the recovered value past 1 and below 0.
        ((1.0, 1.0000000000000036, 0.6666666666666643), (1.0, 1.0, 0.0)),
    ],
)
def test_per_draw_acceptance_is_recovered_and_stays_a_probability(means, expected) -> None:
    recorder = _PyroRecorder(_CountingPotential(lambda params: 0.0))
    for i, mean in enumerate(means):
        recorder(_kernel(mean), {}, "Sample", i)
    assert recorder.stats["acceptance_rate"] == pytest.approx(expected, abs=1e-12)
    assert all(0.0 <= a <= 1.0 for a in recorder.stats["acceptance_rate"])
