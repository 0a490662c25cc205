"""The full-covariance guide's density at its own draw is exact on both backends, however
ill-conditioned its Cholesky factor (:mod:`ppl_bnn.backends.numpyro.guides`,
:mod:`ppl_bnn.backends.pyro.guides`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from ppl_bnn.engine.registry import backend_names

#: The Cholesky factor: ones below the diagonal, DIAGONAL on it, so that a draw's coordinates are
#: nearly equal. Each coordinate's float32 rounding (about 1e-7) is then divided by 1e-9 in a
#: solve of L^{-1}(z - mu), which returns noise of order 1e9 instead of the draw's own.
DIAGONAL = np.array([1.0, 1e-9, 1e-9])
FACTOR = np.tril(np.ones((3, 3)), -1) + np.diag(DIAGONAL)
DRAWS = 20
#: ||eps||^2 of 20 standard-normal draws in 3 dimensions stays below this with probability
#: 1 - 1e-9 (chi-square with 3 degrees of freedom, a union bound over the draws).
BOUND = float(chi2.ppf(1 - 1e-9 / DRAWS, df=3))


def _squared_noise(log_q: float) -> float:
    """||eps||^2 recovered from log q = log N(eps; 0, I) - sum_i log L_ii."""
    return -2.0 * (log_q + np.log(DIAGONAL).sum()) - 3 * math.log(2 * math.pi)


def _numpyro_log_q(seed: int) -> float:
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro import handlers
    from numpyro.infer.util import log_density

    from ppl_bnn.backends.numpyro.guides import guide_class

    def model() -> None:
        numpyro.sample("z", dist.Normal(jnp.zeros(3), 1.0).to_event(1))

    guide = guide_class("AutoMultivariateNormal")(model)
    with handlers.seed(rng_seed=0):
        guide()
    params = {"auto_loc": jnp.ones(3), "auto_scale_tril": jnp.asarray(FACTOR, dtype=jnp.float32)}
    log_q, _ = log_density(handlers.seed(guide, seed), (), {}, params)
    return float(log_q)


def _pyro_log_q(seed: int) -> float:
    import pyro
    import pyro.distributions as dist
    import torch
    from pyro import poutine
    from pyro.distributions import constraints
    from pyro.nn import PyroParam

    from ppl_bnn.backends.pyro.guides import guide_class

    def model() -> None:
        pyro.sample("z", dist.Normal(torch.zeros(3), 1.0).to_event(1))

    pyro.clear_param_store()
    guide = guide_class("AutoMultivariateNormal")(model)
    guide()
    guide.loc = PyroParam(torch.ones(3))
    guide.scale = PyroParam(torch.tensor(DIAGONAL, dtype=torch.float32), constraints.positive)
    unit = torch.tensor(FACTOR / DIAGONAL[:, None], dtype=torch.float32)  # Pyro: L = diag(s) U
    guide.scale_tril = PyroParam(unit, constraints.unit_lower_cholesky)
    torch.manual_seed(seed)
    trace = poutine.trace(guide).get_trace()
    return float(trace.log_prob_sum().detach())


@pytest.mark.parametrize("backend", backend_names())
def test_the_full_covariance_guide_scores_its_own_draws_exactly(backend):
    log_q = _numpyro_log_q if backend == "numpyro" else _pyro_log_q
    squared = [_squared_noise(log_q(seed)) for seed in range(DRAWS)]
    # The libraries' own classes solve, and give ||eps||^2 of 1e18 to 1e22 here.
    assert max(squared) < BOUND, squared
    assert min(squared) >= -1e-3, squared
