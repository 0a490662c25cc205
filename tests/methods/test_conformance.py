"""Every method of the table on every backend it lists, on a tiny model: it runs, its draws have
the documented shapes, a seed gives the draws stored from another process and a different seed
different ones, and bad options are rejected. A method added to :data:`ppl_bnn.methods.METHODS`
is picked up here with no further change but its stored draws.

``stored_draws.json`` holds the first values of a few draws of each (method, backend) at its
smoke options and seed 3, written by running this file as a script from the repository's root
(``python -m tests.methods.test_conformance``), with the tests' runtime (:mod:`tests.runtime`).
A refactor that changes what a seed draws fails here. Regenerate it for a new method, for a
deliberate change of the random streams or of the tests' XLA flags, and say so in the commit.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import ppl_bnn.methods
from ppl_bnn import BNN, FitResult, fit, priors
from ppl_bnn.engine.registry import backend_names
from ppl_bnn.methods import METHODS, make_options
from ppl_bnn.methods.base import Family, Method

pytestmark = pytest.mark.runtime(150)  # seconds on 2 cores: started first (tests/conftest.py)

CASES = [(m, b) for m in METHODS for b in m.backends]
STORED = Path(__file__).with_name("stored_draws.json")
SEED = 3
#: First values of each site's first draws kept per fit (enough to catch a changed stream).
VALUES_PER_SITE = 4
DRAWS_KEPT = 2
#: How far a site's draws may lie from the stored ones, as a fraction of the distance of the
#: next seed's draws from them. The same stream agrees to rounding, and a CPU with other vector
#: instructions rounds differently: a sampler's warmup grows that to at most 0.5% of the seeds'
#: distance (NUTS on Pyro, MCLMC and MAMS, between two x86-64 machines). A changed stream lies
#: about as far as another seed's.
STREAM_TOLERANCE = 0.05


def _model() -> BNN:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 2))
    y = x[:, 0] - x[:, 1] + 0.1 * rng.normal(size=16)
    # PBP's noise prior keeps the noise off zero: under the default, weaker one the MAP of 16
    # points can drive it there, a degenerate mode where Laplace's Hessian is not positive
    # definite (a finding the benchmarks report, not a property of the method's mechanics).
    return BNN(x, y, hidden=(3,), noise="learned", noise_prior=priors.PBP_NOISE_PRIOR)


@pytest.fixture(scope="module")
def model() -> BNN:
    return _model()


def _head(result: FitResult) -> dict[str, list[float]]:
    """The first values of the first draws of the first chain, per site."""
    return {
        name: np.asarray(draws[0, :DRAWS_KEPT], dtype=np.float64)
        .reshape(min(DRAWS_KEPT, draws.shape[1]), -1)[:, :VALUES_PER_SITE]
        .ravel()
        .tolist()
        for name, draws in sorted(result.draws.items())
    }


def test_every_method_module_is_in_the_table() -> None:
    """A module that defines a ``METHOD`` but is missing from the table would never run."""
    defined = set()
    for info in pkgutil.iter_modules(ppl_bnn.methods.__path__):
        module = importlib.import_module(f"ppl_bnn.methods.{info.name}")
        if isinstance(getattr(module, "METHOD", None), Method):
            defined.add(module.METHOD.name)
    assert defined == {m.name for m in METHODS}
    assert len({m.name for m in METHODS}) == len(METHODS)


@pytest.mark.parametrize(("method", "backend"), CASES, ids=[f"{m.name}-{b}" for m, b in CASES])
def test_method_runs_with_documented_shapes_and_reproducible_seeds(model, method, backend):
    first = fit(model, method.name, backend=backend, seed=SEED, **method.smoke)
    other = fit(model, method.name, backend=backend, seed=SEED + 1, **method.smoke)
    sites = {s.name: s.shape for s in model.spec.sites()}
    assert set(first.draws) == set(sites)
    chains, draws = first.num_chains, first.num_draws
    # The memory check before a fit counts the draws the result will hold.
    assert make_options(method, method.smoke, backend=backend).kept_draws == chains * draws
    for name, shape in sites.items():
        assert first.draws[name].shape == (chains, draws, *shape), name
        assert not np.array_equal(first.draws[name], other.draws[name]), name
    key = f"{method.name}/{backend}"
    stored = json.loads(STORED.read_text())
    assert key in stored, f"no stored draws of {key}: run python -m tests.methods.test_conformance"
    now, another_seed = _head(first), _head(other)
    assert sorted(now) == sorted(stored[key])
    for name, values in stored[key].items():
        drift = np.linalg.norm(np.subtract(now[name], values))
        seeds_apart = np.linalg.norm(np.subtract(another_seed[name], values))
        assert drift <= max(STREAM_TOLERANCE * seeds_apart, 1e-5), (
            f"{name}: {drift:.3g} from the stored draws, another seed {seeds_apart:.3g}"
        )
    assert first.log_likelihood.shape == (chains, draws, model.num_data)
    assert (first.method, first.backend, (first.seed, other.seed)) == (
        method.name,
        backend,
        (SEED, SEED + 1),
    )
    if method.family == Family.MARKOV_CHAIN:
        assert all(v.shape == (chains, draws) for v in first.sample_stats.values())
    else:
        assert first.losses is not None


@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
def test_unknown_option_is_rejected_with_the_valid_ones_listed(model, method):
    with pytest.raises(ValueError, match=r"unknown option\(s\) 'no_such_option'") as info:
        fit(model, method.name, no_such_option=1, **method.smoke)
    for name in method.smoke:
        assert name in str(info.value)


@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
def test_bad_option_values_are_rejected(model, method):
    name = next(iter(method.smoke))
    with pytest.raises(ValueError, match=name):
        fit(model, method.name, **{**method.smoke, name: -1})


@pytest.mark.parametrize("backend", backend_names())
def test_hmc_num_steps_is_fixed_on_both_backends(model, backend):
    """A fixed ``num_steps`` stays fixed while the step size adapts (Pyro would otherwise keep
    the trajectory length and grow the number of steps)."""
    result = fit(model, "hmc", backend=backend, num_warmup=30, num_samples=10, num_steps=6)
    assert np.all(result.sample_stats["n_steps"] == 6)


if __name__ == "__main__":
    from tests.runtime import configure_test_runtime

    configure_test_runtime()  # as under pytest
    table = {
        f"{m.name}/{b}": _head(fit(_model(), m.name, backend=b, seed=SEED, **m.smoke))
        for m, b in CASES
    }
    STORED.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
