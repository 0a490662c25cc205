"""Every method against the closed-form posterior of Bayesian linear regression (hidden=())."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from ppl_bnn import fit
from tests.closed_form import flat_draws, linear_problem

pytestmark = pytest.mark.runtime(65)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = ["numpyro", "pyro"]
SAMPLERS = [
    pytest.param("nuts", {}, id="nuts"),
    # Quarter of the period of the whitened Gaussian's dynamics: near-independent draws.
    pytest.param("hmc", {"trajectory_length": 1.5}, id="hmc"),
]


@pytest.fixture(scope="module")
def diagonal():
    problem = linear_problem(correlation=0.0)
    assert np.allclose(problem.cov, np.diag(np.diag(problem.cov)), atol=1e-12)
    return problem


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("method", "extra"), SAMPLERS)
def test_samplers_match_exact_posterior(diagonal, method, extra, backend):
    result = fit(
        diagonal.model,
        method,
        backend=backend,
        seed=11,
        num_warmup=500,
        num_samples=1000,
        num_chains=2,
        **extra,
    )
    draws = flat_draws(result.draws)
    assert draws.shape == (2, 1000, 3)
    for i in range(3):
        ess = float(az.ess(draws[..., i], method="bulk"))
        assert ess > 300, f"coordinate {i}: ESS {ess:.0f} too low for a Gaussian target"
        mcse = diagonal.std[i] / np.sqrt(ess)
        assert abs(draws[..., i].mean() - diagonal.mean[i]) < 4 * mcse, f"mean of coordinate {i}"
        sd, mcse_sd = _sd_and_mcse(draws[..., i])
        assert abs(sd - diagonal.std[i]) < 4 * mcse_sd, f"std of coordinate {i}"
    assert not result.sample_stats["diverging"].any()


@pytest.fixture(scope="module")
def pyro_default_path(diagonal):
    """NUTS on Pyro's own per-site potential, eager: Pyro's default path."""
    return fit(
        diagonal.model,
        "nuts",
        backend="pyro",
        seed=2,
        potential="pyro",
        num_warmup=300,
        num_samples=600,
    )


def _mean_and_mcse(draws: np.ndarray) -> tuple[float, float]:
    return float(draws.mean()), float(draws.std() / np.sqrt(az.ess(draws, method="bulk")))


def _sd_and_mcse(draws: np.ndarray) -> tuple[float, float]:
    """The draws' standard deviation and its Monte Carlo standard error (chain, draw)."""
    return float(draws.std()), float(az.mcse(draws, method="sd"))


def test_pyro_default_path_matches_exact_posterior(diagonal, pyro_default_path):
    """Pyro's own eager potential samples the same posterior and says which mode ran."""
    assert pyro_default_path.info["pyro_mode"] == "pyro"
    draws = flat_draws(pyro_default_path.draws)
    for i in range(3):
        mean, mcse = _mean_and_mcse(draws[..., i])
        assert abs(mean - diagonal.mean[i]) < 4 * mcse, f"mean of coordinate {i}"
        sd, mcse_sd = _sd_and_mcse(draws[..., i])
        assert abs(sd - diagonal.std[i]) < 4 * mcse_sd, f"std of coordinate {i}"


@pytest.mark.parametrize("potential", ["compiled", "traced"])
def test_flat_potentials_sample_as_pyros_default_path(diagonal, pyro_default_path, potential):
    """The flat-vector potentials give the same draws distribution as Pyro's default path: means
    and standard deviations agree within 4 combined Monte Carlo standard errors."""
    result = fit(
        diagonal.model,
        "nuts",
        backend="pyro",
        seed=3,
        potential=potential,
        num_warmup=300,
        num_samples=600,
    )
    assert result.info["pyro_mode"] == potential
    fast, default = flat_draws(result.draws), flat_draws(pyro_default_path.draws)
    for i in range(3):
        (m_fast, se_fast), (m_default, se_default) = (
            _mean_and_mcse(fast[..., i]),
            _mean_and_mcse(default[..., i]),
        )
        assert abs(m_fast - m_default) < 4 * np.hypot(se_fast, se_default), f"coordinate {i}"
        (s_fast, se_fast), (s_default, se_default) = (
            _sd_and_mcse(fast[..., i]),
            _sd_and_mcse(default[..., i]),
        )
        assert abs(s_fast - s_default) < 4 * np.hypot(se_fast, se_default), f"std {i}"


def _svi(problem, backend):
    return fit(
        problem.model,
        "svi",
        backend=backend,
        seed=5,
        num_steps=5000,
        learning_rate=0.005,
        num_particles=8,
        num_draws=4000,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_svi_is_exact_when_posterior_is_diagonal(diagonal, backend):
    result = _svi(diagonal, backend)
    loc = np.concatenate([result.variational["loc"]["w0"][:, 0], result.variational["loc"]["b0"]])
    scale = np.concatenate(
        [result.variational["scale"]["w0"][:, 0], result.variational["scale"]["b0"]]
    )
    np.testing.assert_allclose(loc, diagonal.mean, atol=0.05)
    np.testing.assert_allclose(np.log(scale), np.log(diagonal.std), atol=0.1)
    # The draws are taken from that guide.
    draws = flat_draws(result.draws)[0]
    np.testing.assert_allclose(draws.mean(axis=0), loc, atol=4 * scale.max() / np.sqrt(4000))


@pytest.mark.parametrize("backend", BACKENDS)
def test_svi_underestimates_marginal_std_when_posterior_is_correlated(backend):
    """Mean-field KL(q||p) keeps the exact means but matches the conditional, not the marginal,
    variances: std_i = 1 / sqrt(precision_ii), well below the true marginal std here."""
    problem = linear_problem(correlation=0.9)
    assert problem.mean_field_std[0] < 0.5 * problem.std[0]
    result = _svi(problem, backend)
    scale = result.variational["scale"]["w0"][:, 0]
    np.testing.assert_allclose(result.variational["loc"]["w0"][:, 0], problem.mean[:2], atol=0.05)
    np.testing.assert_allclose(scale, problem.mean_field_std[:2], rtol=0.1)
    assert np.all(scale < 0.6 * problem.std[:2])
