"""Data sets bundled with scikit-learn, which need no data directory: ``diabetes``, ``digits``.

Split ``k`` is a random permutation of the rows drawn from
:func:`ppl_bnn.data.prepare.split_generator` ``(name, k)``, cut into train and test.
"""

from __future__ import annotations

import numpy as np

from ppl_bnn.data.prepare import RawData, split_generator

DIABETES_TRAIN_FRACTION = 0.9
DIGITS_TRAIN_FRACTION = 0.8
DIGITS_PIXEL_MAX = 16.0
DIGITS_N_OOD = 500


def _permutation_split(
    n: int, train_fraction: float, name: str, split: int
) -> tuple[np.ndarray, np.ndarray]:
    """Train and test row indices: a random permutation cut at ``round(train_fraction * n)``."""
    order = split_generator(name, split).permutation(n)
    n_train = round(train_fraction * n)
    return order[:n_train], order[n_train:]


def diabetes(split: int) -> RawData:
    """Diabetes progression (Efron, Hastie, Johnstone & Tibshirani 2004), 442 x 10, regression.

    Read with :func:`sklearn.datasets.load_diabetes` ``(scaled=False)`` (original units; the
    loader standardises). Split ``k``: a random 90/10 train/test cut (398 / 44 rows).
    """
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True, scaled=False)
    train, test = _permutation_split(len(x), DIABETES_TRAIN_FRACTION, "diabetes", split)
    return RawData(
        task="regression",
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        source="scikit-learn load_diabetes (Efron et al. 2004, 'Least Angle Regression')",
    )


def digits(split: int) -> RawData:
    """8x8 handwritten digits (UCI Optical Recognition of Handwritten Digits), 10 classes.

    Read with :func:`sklearn.datasets.load_digits`: 1797 images of 64 pixels valued 0..16, scaled
    to [0, 1] by dividing by 16. Split ``k``: a random 80/20 train/test cut (1438 / 359 rows), not
    stratified. OOD set: 500 images of independent uniform noise on [0, 1] per pixel (as in the
    TensorFlow Probability Bayesian LeNet example), drawn from the split's own stream.
    """
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    train, test = _permutation_split(len(x), DIGITS_TRAIN_FRACTION, "digits", split)
    noise = split_generator("digits", split, purpose="ood").uniform(
        0.0, DIGITS_PIXEL_MAX, size=(DIGITS_N_OOD, x.shape[1])
    )
    return RawData(
        task="classification",
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        num_classes=10,
        pixel_max=DIGITS_PIXEL_MAX,
        image_shape=(8, 8, 1),
        x_ood=noise,
        ood_name="uniform noise",
        source="scikit-learn load_digits (UCI Optical Recognition of Handwritten Digits)",
    )
