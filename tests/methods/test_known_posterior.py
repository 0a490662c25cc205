"""Every method against the closed-form posterior of Bayesian linear regression (hidden=())."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from ppl_bnn import fit
from ppl_bnn.engine.registry import backend_names
from tests.closed_form import flat_draws, linear_problem

pytestmark = pytest.mark.runtime(75)  # seconds on 2 cores: started first (tests/conftest.py)

BACKENDS = backend_names()
#: Bulk ESS of 2 x 1000 draws below which a sampler is not mixing (a random walk gives tens).
#: The tolerances below scale with the ESS, so this guards only against a broken sampler. Seeds
#: 11-18 gave 1,130-1,910 on NumPyro and 250-1,790 on Pyro, whose HMC adapts a step size that
#: can bring its fixed trajectory near a resonance of this Gaussian.
MIN_ESS = 150
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
        assert ess > MIN_ESS, f"coordinate {i}: ESS {ess:.0f} too low for a Gaussian target"
        mcse = diagonal.std[i] / np.sqrt(ess)
        assert abs(draws[..., i].mean() - diagonal.mean[i]) < 4 * mcse, f"mean of coordinate {i}"
        sd, mcse_sd = _sd_and_mcse(draws[..., i])
        assert abs(sd - diagonal.std[i]) < 4 * mcse_sd, f"std of coordinate {i}"
    assert not result.sample_stats["diverging"].any()


@pytest.mark.parametrize("init", ["uniform", "ensemble"])
def test_mclmc_matches_exact_posterior_within_its_bias(diagonal, init):
    """Unadjusted MCLMC (NumPyro only) has no Metropolis test, so its draws carry a bias besides
    the Monte Carlo error, and the tolerance adds it.

    Means: the posterior is Gaussian and MCLMC's dynamics and noise are symmetric under the
    reflection about its mean, so the stationary distribution keeps the mean: 4 MCSE.

    Standard deviations: for Gaussian targets the squared relative bias of the second moments,
    averaged over the d coordinates, is at most the energy error variance per dimension that
    the tuner targets (Robnik & Seljak 2024, arXiv:2412.08876), so one coordinate's variance is
    off by at most sqrt(d * desired_energy_var) of itself, 3.9% here (d = 3, 5e-4), its
    standard deviation by half of that, 1.9%. The tolerance is 4 MCSE plus that, 3.9% of the
    standard deviation with 20,000 near-independent draws. (Measured with 8 chains of 20,000
    draws: -0.3% to -1.0%, MCSE 0.2%; at desired_energy_var=5e-2 the draws' standard
    deviations fall 4% to 6% short, and this test fails.)
    """
    energy_var, dim = 5e-4, 3
    bias = np.sqrt(dim * energy_var) / 2
    result = fit(
        diagonal.model,
        "mclmc",
        seed=11,
        num_warmup=1000,
        num_samples=5000,
        num_chains=4,
        desired_energy_var=energy_var,
        init=init,
    )
    draws = flat_draws(result.draws)
    assert draws.shape == (4, 5000, 3)
    assert (result.info["frozen_chains"], result.info["dropped_chains"]) == ([], [])
    for i in range(3):
        mean, mcse = _mean_and_mcse(draws[..., i])
        assert az.ess(draws[..., i], method="bulk") > 5000, f"coordinate {i}: ESS too low"
        assert abs(mean - diagonal.mean[i]) < 4 * mcse, f"mean of coordinate {i}"
        sd, mcse_sd = _sd_and_mcse(draws[..., i])
        tolerance = 4 * mcse_sd + bias * diagonal.std[i]
        assert abs(sd - diagonal.std[i]) < tolerance, f"std of coordinate {i}"


@pytest.mark.parametrize("init", ["uniform", "ensemble"])
def test_mams_matches_exact_posterior(diagonal, init):
    """Adjusted MCLMC (NumPyro only) has a Metropolis test: its draws match the posterior to
    Monte Carlo error alone (4 MCSE on each mean and standard deviation), with no divergence."""
    result = fit(
        diagonal.model, "mams", seed=11, num_warmup=1000, num_samples=2000, num_chains=4,
        init=init,
    )  # fmt: skip
    draws = flat_draws(result.draws)
    assert draws.shape == (4, 2000, 3)
    assert (result.info["frozen_chains"], result.info["dropped_chains"]) == ([], [])
    assert min(result.info["acceptance"]) > 0.8  # tuned for 0.9
    for i in range(3):
        mean, mcse = _mean_and_mcse(draws[..., i])
        assert az.ess(draws[..., i], method="bulk") > 2000, f"coordinate {i}: ESS too low"
        assert abs(mean - diagonal.mean[i]) < 4 * mcse, f"mean of coordinate {i}"
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
