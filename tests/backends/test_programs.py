"""NumPyro's compiled programs kept per process: a later fit that reuses one gets exactly what
compiling its own would give, also on other data of the same shapes (the data are arguments)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.backends.numpyro import programs

FITS = {
    "map": {"num_steps": 60},
    "svi": {"num_steps": 60, "num_draws": 10},
    "svi-flipout": {"num_steps": 60, "num_draws": 10, "estimator": "flipout", "batch_size": 8},
    "sgld": {"num_burnin": 40, "num_samples": 5, "thinning": 1, "step_size": 1e-4},
}


def _second_fit_reuses_the_firsts_programs(first: Callable, other: Callable) -> tuple:
    """``first()`` then ``other()`` (fits) on an empty program cache: ``other`` compiles nothing
    and gets bit for bit what it gets with programs of its own, compiled on an empty cache.
    Returns ``(reused, compiled)``, its two results."""
    programs._programs.clear()
    first()
    kept = len(programs._programs)
    reused = other()
    assert len(programs._programs) == kept  # nothing compiled again
    programs._programs.clear()
    compiled = other()
    for site, draws in compiled.draws.items():
        np.testing.assert_array_equal(reused.draws[site], draws)
    return reused, compiled


@pytest.mark.parametrize("name", list(FITS))
def test_a_reused_program_gives_the_fit_a_new_one_gives_on_other_data(
    regression_data: tuple[np.ndarray, np.ndarray], name: str
) -> None:
    x, y = regression_data
    method, options = name.split("-")[0], FITS[name]
    first = BNN(x, y, hidden=(4,), noise=0.3)
    other = BNN(x, np.cos(2 * y), hidden=(4,), noise=0.3)  # same shapes, other values
    reused, compiled = _second_fit_reuses_the_firsts_programs(
        lambda: fit(first, method, seed=0, **options), lambda: fit(other, method, seed=1, **options)
    )

    # Counted, not timed: the new program is compiled or loaded from the persistent cache,
    # the reused one neither (their compile seconds, mostly eager set-up, overlap under load).
    def programs_built(result):
        return result.info["jax_cache"]["compiles"] + result.info["jax_cache"]["cache_hits"]

    assert programs_built(reused) < programs_built(compiled)


def test_fits_that_differ_only_in_the_kl_weight_share_one_program(
    regression_data: tuple[np.ndarray, np.ndarray],
) -> None:
    """A beta sweep: the likelihood scale N / (batch * beta) is an argument of the program."""
    x, y = regression_data
    model = BNN(x, y, hidden=(4,), noise=0.3)
    options = FITS["svi"]
    _, compiled = _second_fit_reuses_the_firsts_programs(
        lambda: fit(model, "svi", seed=0, kl_weight=1.0, **options),
        lambda: fit(model, "svi", seed=0, kl_weight=0.1, **options),
    )
    # The weight reaches the program: the tempered fit is not the untempered one.
    untempered = fit(model, "svi", seed=0, kl_weight=1.0, **options)
    assert not np.array_equal(untempered.draws["w0"], compiled.draws["w0"])


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("map", {"num_steps": 60}),
        ("mcdropout", {"num_steps": 60, "dropout_rate": 0.1, "num_draws": 5}),
        ("laplace", {"num_steps": 60, "num_draws": 5}),
        ("ensemble", {"num_steps": 60, "num_members": 2}),
        ("sgld", FITS["sgld"]),
        ("swag", {"num_steps": 60, "num_snapshots": 10, "rank": 5, "num_draws": 5}),
    ],
)
def test_fits_that_differ_only_in_the_models_numbers_share_one_program(
    regression_data: tuple[np.ndarray, np.ndarray], method: str, options: dict
) -> None:
    """A tuning grid over the known noise and the prior's std: the numbers are arguments of the
    programs (model_numbers), so every setting after the first runs the programs compiled for
    it, and gets exactly what compiling its own would give."""
    x, y = regression_data
    first = BNN(x, y, hidden=(4,), noise=0.3, prior_scale=1.0)
    other = BNN(x, y, hidden=(4,), noise=0.7, prior_scale=0.3)
    reused, _ = _second_fit_reuses_the_firsts_programs(
        lambda: fit(first, method, seed=0, **options), lambda: fit(other, method, seed=0, **options)
    )
    # The numbers reach the programs: the first setting's fit is not the other's.
    assert not np.array_equal(fit(first, method, seed=0, **options).draws["w0"], reused.draws["w0"])


@pytest.mark.parametrize(
    ("method", "option", "values", "options"),
    [
        ("sgld", "step_size", (1e-4, 3e-4), {k: v for k, v in FITS["sgld"].items()
                                             if k != "step_size"}),
        ("swag", "swag_learning_rate", (0.01, 0.03),
         {"num_steps": 60, "num_snapshots": 10, "rank": 5, "num_draws": 5}),
    ],
)  # fmt: skip
def test_sg_mcmc_fits_that_differ_only_in_the_step_size_share_one_program(
    regression_data: tuple[np.ndarray, np.ndarray],
    method: str,
    option: str,
    values: tuple[float, float],
    options: dict,
) -> None:
    """A grid of step sizes (SWAG's learning rate sets its SGD phase's): the step size is an
    argument of the SG-MCMC programs."""
    x, y = regression_data
    model = BNN(x, y, hidden=(4,), noise=0.3)
    first, other = ({**options, option: value} for value in values)
    reused, _ = _second_fit_reuses_the_firsts_programs(
        lambda: fit(model, method, seed=0, **first), lambda: fit(model, method, seed=0, **other)
    )
    assert not np.array_equal(fit(model, method, seed=0, **first).draws["w0"], reused.draws["w0"])


def test_mc_dropout_fits_that_differ_only_in_the_rate_share_one_program(
    regression_data: tuple[np.ndarray, np.ndarray],
) -> None:
    """MC dropout's rate grid: the fixed rate is one of the model's numbers."""
    x, y = regression_data
    model = BNN(x, y, hidden=(4,), noise=0.3)
    options = {"num_steps": 60, "num_draws": 5}
    reused, _ = _second_fit_reuses_the_firsts_programs(
        lambda: fit(model, "mcdropout", seed=0, dropout_rate=0.1, **options),
        lambda: fit(model, "mcdropout", seed=0, dropout_rate=0.3, **options),
    )
    # The rate reaches the training (not only the masks drawn after it): other losses.
    trained = fit(model, "mcdropout", seed=0, dropout_rate=0.1, **options)
    assert not np.array_equal(trained.losses, reused.losses)


def test_a_program_of_another_model_is_not_reused() -> None:
    """MC dropout trains its MAP on the model with masks, with map's options (from 200 points
    both stop early): map's programs, compiled first in the process, must not train it without
    them."""
    x = np.random.default_rng(0).normal(size=(200, 2))
    model = BNN(x, np.sin(x[:, 0]), hidden=(4,), noise=0.3)
    options = {"num_steps": 60, "dropout_rate": 0.3}
    programs._programs.clear()
    alone = fit(model, "mcdropout", seed=0, **options)
    programs._programs.clear()
    fit(model, "map", seed=0, num_steps=60)
    after_map = fit(model, "mcdropout", seed=0, **options)
    for site, draws in alone.draws.items():
        np.testing.assert_array_equal(after_map.draws[site], draws)


@pytest.mark.parametrize(
    ("method", "options"), [("map", {}), ("svi", {"init_loc": "uniform", "num_draws": 5})]
)
def test_initialising_a_new_model_shape_compiles_one_program_not_one_per_operation(
    regression_data: tuple[np.ndarray, np.ndarray], method: str, options: dict
) -> None:
    """``SVI.init`` run eagerly compiled each operation for the model's shapes: about 150 XLA
    programs per new shape for ``svi``, which took longer than its optimisation. Run as one
    program, a fit of a new shape compiles its few programs and the operations around them."""
    x, y = regression_data
    for hidden in ((6,), (7, 2)):  # the first warms this process
        model = BNN(x, y, hidden=hidden, noise="learned")
        result = fit(model, method, seed=0, num_steps=5, **options)
    assert result.info["jax_cache"]["compiles"] + result.info["jax_cache"]["cache_hits"] < 30
