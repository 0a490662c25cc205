"""The shared-fit store: MAP's run is fitted once and read by the Laplace that starts from it,
with the same result and an honest cost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ppl_bnn import BNN, fit
from ppl_bnn.methods import shared

MAP_OPTIONS = {"num_steps": 40}


@pytest.fixture
def model(regression_data: tuple[np.ndarray, np.ndarray]) -> BNN:
    x, y = regression_data
    return BNN(x, y, hidden=(4,), noise=0.3)


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
def test_laplace_reads_the_map_run_of_its_seed_and_gets_the_same_result(
    tmp_path: Path, model: BNN, backend: str
) -> None:
    alone = fit(model, "laplace", backend=backend, seed=3, num_draws=20, **MAP_OPTIONS)
    store = tmp_path / "fits"
    with shared.use_store(store):
        mode = fit(model, "map", backend=backend, seed=3, **MAP_OPTIONS)
        (entry,) = store.iterdir()
        laplace = fit(model, "laplace", backend=backend, seed=3, num_draws=20, **MAP_OPTIONS)
    assert "shared_fits" not in mode.info and "shared" not in mode.timings
    (read,) = laplace.info["shared_fits"]
    assert read["method"] == "map" and entry.name == f"{read['key']}.pkl"
    # The cost of the MAP run it read counts as the Laplace's own.
    assert laplace.timings["shared"] == read["seconds"] > 0
    assert laplace.timings["total"] > read["seconds"]
    for site, draws in alone.draws.items():
        np.testing.assert_array_equal(laplace.draws[site], draws)
    assert "shared_fits" not in alone.info


def test_runs_are_shared_only_with_the_same_seed_options_and_data(
    tmp_path: Path, model: BNN
) -> None:
    store = tmp_path / "fits"
    with shared.use_store(store):
        fit(model, "map", seed=0, **MAP_OPTIONS)
        other_seed = fit(model, "laplace", seed=1, num_draws=5, **MAP_OPTIONS)
        other_steps = fit(model, "laplace", seed=0, num_draws=5, num_steps=41)
        other_data = BNN(model.x, model.y + 1.0, hidden=(4,), noise=0.3)
        moved = fit(other_data, "laplace", seed=0, num_draws=5, **MAP_OPTIONS)
        same = fit(model, "map", seed=0, **MAP_OPTIONS)
    for result in (other_seed, other_steps, moved):
        assert "shared_fits" not in result.info
    assert len(same.info["shared_fits"]) == 1
    assert len(list(store.iterdir())) == 4


@pytest.mark.parametrize("backend", ["numpyro", "pyro"])
def test_mc_dropouts_runs_are_its_own_for_each_rate_and_never_maps(
    tmp_path: Path, model: BNN, backend: str
) -> None:
    """MC dropout trains map's driver on the model with masks, with map's options: the masks
    are part of the key, so it reads neither map's run nor another rate's."""
    store = tmp_path / "fits"
    options = {**MAP_OPTIONS, "num_draws": 4}
    with shared.use_store(store):
        plain = fit(model, "map", backend=backend, seed=0, **MAP_OPTIONS)
        low = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.1, **options)
        high = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.3, **options)
        again = fit(model, "mcdropout", backend=backend, seed=0, dropout_rate=0.3, **options)
    for result in (low, high):
        assert "shared_fits" not in result.info
    assert len(again.info["shared_fits"]) == 1
    assert len(list(store.iterdir())) == 3
    # The trained weights differ: each masked run trained under its own masks.
    for a, b in ((plain, low), (low, high)):
        assert not np.array_equal(a.draws["w0"][0, 0], b.draws["w0"][0, 0])


def test_a_run_of_other_fitting_code_is_not_read(
    tmp_path: Path, model: BNN, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "fits"
    with shared.use_store(store):
        fit(model, "map", seed=0, **MAP_OPTIONS)
        # As after an edit of the package's fitting code (its source hash changes).
        monkeypatch.setattr(shared, "fitting_code_key", lambda: "edited")
        edited = fit(model, "map", seed=0, **MAP_OPTIONS)
    assert "shared_fits" not in edited.info
    assert len(list(store.iterdir())) == 2
