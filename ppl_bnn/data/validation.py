"""A validation split carved from a training set, for choosing settings without the test set.

Gal & Ghahramani (2016, UCI protocol) hold out 20% of each training set at random, choose the
dropout rate, the noise precision and the number of epochs on it, and refit on the whole
training set with the chosen settings. :func:`validation_split` holds out the points and
prepares the rest exactly as :func:`ppl_bnn.data.load_dataset` prepares a training set: inputs
and regression targets standardised with the statistics of the points the fits see (image
inputs stay scaled by their largest pixel value). The test set plays no part.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppl_bnn.data.dataset import Dataset
from ppl_bnn.data.prepare import column_stats


@dataclass(frozen=True, eq=False)
class ValidationSplit:
    """A training set split in two.

    Attributes:
        data: A :class:`~ppl_bnn.data.Dataset` whose training set is the part the fits see and
            whose test set is the held-out validation part, both standardised with the fit
            part's statistics (``y_mean``, ``y_std`` convert back to original units).
        fit_indices: Sorted rows of the original training set in the fit part.
        validation_indices: Sorted rows of the original training set held out.
    """

    data: Dataset
    fit_indices: np.ndarray
    validation_indices: np.ndarray


def validation_split(data: Dataset, fraction: float, rng: np.random.Generator) -> ValidationSplit:
    """Hold out ``round(fraction * n_train)`` training points, drawn by ``rng.permutation``.

    Args:
        data: A loaded split (training statistics already applied; they are undone here).
        fraction: Share of the training set held out, in (0, 1).
        rng: The stream the held-out rows are drawn from (an explicit seed, e.g.
            :func:`ppl_bnn.seeding.numpy_generator`).

    Raises:
        ValueError: ``fraction`` outside (0, 1), or a training set too small to leave at least
            one validation point and two fit points.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be a number in (0, 1), got {fraction!r}")
    n = data.n_train
    n_val = round(fraction * n)
    if n_val < 1 or n - n_val < 2:
        raise ValueError(
            f"{data.name} split {data.split}: a validation fraction of {fraction} of "
            f"{n} training points leaves {n_val} validation and {n - n_val} fit points; "
            "at least 1 and 2 are needed"
        )
    order = rng.permutation(n)
    val_idx, fit_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    x = data.x_train
    if data.pixel_max is None:
        shape = data.input_shape
        flat = (x * data.x_std + data.x_mean).reshape(n, -1)
        x_mean, x_std = column_stats(flat[fit_idx])
        x = ((flat - x_mean) / x_std).reshape(n, *shape)
        x_mean, x_std = x_mean.reshape(shape), x_std.reshape(shape)
    else:
        x_mean, x_std = data.x_mean, data.x_std
    y, y_mean, y_std = data.y_train, data.y_mean, data.y_std
    if data.task == "regression":
        original = y * data.y_std + data.y_mean
        mean, std = column_stats(original[fit_idx, None])
        y_mean, y_std = float(mean[0]), float(std[0])
        y = (original - y_mean) / y_std
    carved = Dataset(
        name=data.name,
        task=data.task,
        split=data.split,
        x_train=x[fit_idx],
        y_train=y[fit_idx],
        x_test=x[val_idx],
        y_test=y[val_idx],
        num_classes=data.num_classes,
        y_mean=y_mean,
        y_std=y_std,
        x_mean=x_mean,
        x_std=x_std,
        source=f"{data.source} (validation split: {n_val} of {n} training points held out)",
        pixel_max=data.pixel_max,
    )
    return ValidationSplit(carved, fit_idx, val_idx)
