"""Image sets load as images (N, H, W, C) on request, the same values as their flat rows."""

from __future__ import annotations

import numpy as np
import pytest

from ppl_bnn.data import load_dataset


def test_digits_as_images_are_the_flat_rows_reshaped():
    flat = load_dataset("digits", split=2, max_train=50, max_test=20)
    images = load_dataset("digits", split=2, max_train=50, max_test=20, image=True)
    assert images.x_train.shape == (50, 8, 8, 1) and images.input_shape == (8, 8, 1)
    assert images.input_dim == flat.input_dim == 64
    for name in ("x_train", "x_test", "x_ood"):
        flat_x, image_x = getattr(flat, name), getattr(images, name)
        np.testing.assert_array_equal(image_x.reshape(len(image_x), -1), flat_x)
    np.testing.assert_array_equal(images.y_train, flat.y_train)
    assert images.x_mean.shape == images.x_std.shape == (8, 8, 1)
    assert flat.x_train.ndim == 2  # flat stays the default


def test_image_option_is_for_image_sets_only():
    with pytest.raises(ValueError, match="sine is not an image set; image=True needs images"):
        load_dataset("sine", image=True)
    with pytest.raises(ValueError, match="image must be True or False, got 1"):
        load_dataset("digits", image=1)


def test_mnist_as_images(mnist_data):
    ds = load_dataset("mnist", data_dir=mnist_data, max_train=30, max_test=10, image=True)
    assert ds.x_train.shape == (30, 28, 28, 1) and ds.x_test.shape == (10, 28, 28, 1)
    assert ds.x_ood.shape == (10, 28, 28, 1)
    assert ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0
    flat = load_dataset("mnist", data_dir=mnist_data, max_train=30, max_test=10)
    np.testing.assert_array_equal(ds.x_train.reshape(30, -1), flat.x_train)
