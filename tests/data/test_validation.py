"""The validation split carved from a training set (Gal & Ghahramani 2016's 80/20 protocol)."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn.data import load_dataset
from ppl_bnn.data.validation import validation_split
from ppl_bnn.seeding import numpy_generator


def _rng(seed: int = 0) -> np.random.Generator:
    return numpy_generator(seed, "test validation split")


def test_the_split_partitions_the_training_set_and_restandardises_on_the_fit_part() -> None:
    data = load_dataset("diabetes", split=1)
    split = validation_split(data, 0.2, _rng())
    fit, val = split.fit_indices, split.validation_indices
    assert len(val) == round(0.2 * data.n_train) and len(fit) + len(val) == data.n_train
    assert not set(fit) & set(val)
    assert np.all(np.diff(fit) > 0) and np.all(np.diff(val) > 0)
    carved = split.data
    assert (carved.n_train, carved.n_test) == (len(fit), len(val))
    # Standardised on the fit part, exactly as load_dataset standardises a training set.
    np.testing.assert_allclose(carved.x_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(carved.x_train.std(axis=0), 1.0, atol=1e-12)
    assert abs(carved.y_train.mean()) < 1e-12 and abs(carved.y_train.std() - 1.0) < 1e-12
    # The same points in original units: training rows only, never a test row.
    original_x = data.x_to_original(data.x_train)
    np.testing.assert_allclose(carved.x_to_original(carved.x_train), original_x[fit])
    np.testing.assert_allclose(carved.x_to_original(carved.x_test), original_x[val])
    original_y = data.y_to_original(data.y_train)
    np.testing.assert_allclose(carved.y_to_original(carved.y_test), original_y[val])
    assert carved.x_ood is None and carved.x_grid is None and carved.test_inside is None


def test_the_split_is_fixed_by_its_seed() -> None:
    data = load_dataset("sine", split=0)
    first = validation_split(data, 0.25, _rng(3))
    again = validation_split(data, 0.25, _rng(3))
    other = validation_split(data, 0.25, _rng(4))
    np.testing.assert_array_equal(first.validation_indices, again.validation_indices)
    np.testing.assert_array_equal(first.data.x_train, again.data.x_train)
    assert not np.array_equal(first.validation_indices, other.validation_indices)


def test_image_inputs_stay_scaled_by_their_largest_pixel_value() -> None:
    data = load_dataset("digits", split=0, max_train=50)
    assert data.pixel_max == 16.0
    split = validation_split(data, 0.2, _rng())
    np.testing.assert_array_equal(split.data.x_train, data.x_train[split.fit_indices])
    np.testing.assert_array_equal(split.data.y_test, data.y_train[split.validation_indices])
    assert split.data.pixel_max == 16.0 and split.data.num_classes == 10


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.2, 1.5, True, "0.2"])
def test_a_fraction_outside_the_unit_interval_is_refused(fraction: object) -> None:
    data = load_dataset("sine", split=0)
    with pytest.raises(ValueError, match=r"validation fraction must be a number in \(0, 1\)"):
        validation_split(data, fraction, _rng())  # type: ignore[arg-type]


def test_a_training_set_too_small_to_split_is_refused() -> None:
    data = load_dataset("sine", split=0, max_train=3)
    with pytest.raises(ValueError, match="leaves 0 validation and 3 fit points"):
        validation_split(data, 0.1, _rng())
    with pytest.raises(ValueError, match="leaves 2 validation and 1 fit points"):
        validation_split(data, 0.6, _rng())
