"""The same seed gives the same draws as the stored ones, for every method on both backends.

``stored_draws.json`` holds a few draws of each (method, backend) on a tiny model, written once by
running this file as a script (``python tests/methods/test_stored_draws.py``). A refactor that
changes what a seed draws fails here. Regenerate it only for a deliberate change of the random
streams, and say so in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppl_bnn import BNN, fit, priors

STORED = Path(__file__).with_name("stored_draws.json")
SEED = 3
#: First values of each site's first draws kept per fit (enough to catch a changed stream).
VALUES_PER_SITE = 4
DRAWS_KEPT = 2

OPTIONS = {
    "svi": {"num_steps": 30, "num_draws": 5},
    "lowrank": {"num_steps": 30, "num_draws": 5},
    "fullrank": {"num_steps": 30, "num_draws": 5},
    # map and ensemble as stored, from the libraries' uniform start (their default is now the
    # fan-in-scaled one, tested in test_init_loc.py).
    "map": {"num_steps": 30, "init_loc": "uniform"},
    "laplace": {"num_steps": 300, "learning_rate": 0.05, "num_draws": 5, "hessian": "full"},
    "ensemble": {"num_steps": 20, "num_members": 2, "init_loc": "uniform"},
    "nuts": {"num_warmup": 10, "num_samples": 5, "max_tree_depth": 4},
    "hmc": {"num_warmup": 10, "num_samples": 5, "num_steps": 4},
    "sgld": {"num_burnin": 10, "num_samples": 5, "thinning": 2, "batch_size": 8},
    "sghmc": {"num_burnin": 10, "num_samples": 5, "thinning": 2, "batch_size": 8},
}
BACKENDS = ("numpyro", "pyro")


def _model() -> BNN:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    y = x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=16)
    # The noise prior the draws were stored with (the default changed after they were).
    return BNN(x, y, hidden=(3,), noise="learned", noise_prior=priors.PBP_NOISE_PRIOR)


def _summary(method: str, backend: str) -> dict[str, list[float]]:
    result = fit(_model(), method, backend=backend, seed=SEED, **OPTIONS[method])
    return {
        name: np.asarray(draws[0, :DRAWS_KEPT], dtype=np.float64)
        .reshape(min(DRAWS_KEPT, draws.shape[1]), -1)[:, :VALUES_PER_SITE]
        .ravel()
        .tolist()
        for name, draws in sorted(result.draws.items())
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", sorted(OPTIONS))
def test_seed_gives_the_stored_draws(method: str, backend: str) -> None:
    stored = json.loads(STORED.read_text())[f"{method}/{backend}"]
    now = _summary(method, backend)
    assert sorted(now) == sorted(stored)
    for name, values in stored.items():
        # float32 draws: identical streams agree to rounding; a changed stream differs at O(1).
        np.testing.assert_allclose(now[name], values, rtol=1e-4, atol=1e-5, err_msg=name)


if __name__ == "__main__":
    from ppl_bnn import configure_runtime

    configure_runtime(host_devices=2, torch_threads=1)  # as tests/conftest.py
    table = {f"{m}/{b}": _summary(m, b) for m in sorted(OPTIONS) for b in BACKENDS}
    STORED.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
