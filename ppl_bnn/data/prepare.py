"""From raw arrays to a :class:`Dataset`: optional random subsets, then standardisation.

Loaders return a :class:`RawData` in original units; :func:`build` turns it into a Dataset.
Randomness is explicit: :func:`split_generator` gives the stream a built-in set draws split ``k``
from, :func:`subset_generators` the streams of the ``max_train`` / ``max_test`` subsets. Both come
from :class:`numpy.random.SeedSequence`; no global RNG is touched.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from ppl_bnn.data.dataset import Dataset


@dataclass(frozen=True, eq=False)
class RawData:
    """One split in original units, as a loader reads or draws it.

    ``pixel_max`` set means the inputs are images with values in ``[0, pixel_max]``: they are
    divided by ``pixel_max`` instead of standardised. ``x_ood`` and ``x_grid`` are in the same
    original units as ``x_test``. Labels of classification sets are integer class indices.
    ``test_inside`` and ``regions`` split the test set where training inputs cover only part of
    it (see :class:`~ppl_bnn.data.dataset.Dataset`). ``image_shape`` (H, W, C): the flat inputs
    are images of that shape, row-major and channels last, and can be loaded as such.
    """

    task: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int | None = None
    pixel_max: float | None = None
    x_ood: np.ndarray | None = None
    ood_name: str | None = None
    x_grid: np.ndarray | None = None
    source: str = ""
    test_inside: np.ndarray | None = None
    regions: tuple[str, str] | None = None
    image_shape: tuple[int, int, int] | None = None


def split_generator(name: str, split: int, purpose: str = "data") -> np.random.Generator:
    """The stream that built-in set ``name`` draws split ``split`` from.

    It is ``default_rng(SeedSequence(split, spawn_key=(crc32(name), crc32(purpose))))``: fixed for
    a given (name, split, purpose), independent across them, and independent of the ``seed``
    argument of :func:`ppl_bnn.data.load_dataset` (which only drives subsets).
    """
    key = (zlib.crc32(name.encode()), zlib.crc32(purpose.encode()))
    return np.random.default_rng(np.random.SeedSequence(split, spawn_key=key))


def subset_generators(seed: int, split: int) -> tuple[np.random.Generator, ...]:
    """Streams for the train, test and OOD subsets: children of ``SeedSequence((seed, split))``."""
    children = np.random.SeedSequence((seed, split)).spawn(3)
    return tuple(np.random.default_rng(child) for child in children)


def column_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and std (``ddof=0``) of ``x``; a constant column gets std 1.

    A constant column's mean is its value exactly, so it standardises to exact zeros.

    Args:
        x: ``(N, D)`` array with ``N >= 1``.
    """
    constant = np.ptp(x, axis=0) == 0
    mean = np.where(constant, x[0], x.mean(axis=0))
    std = np.where(constant, 1.0, x.std(axis=0))
    return mean, std


def _subset(n: int, limit: int | None, rng: np.random.Generator) -> np.ndarray | None:
    """Sorted indices of a random subset of size ``limit`` of ``range(n)``; ``None``: keep all."""
    if limit is None or limit >= n:
        return None
    return np.sort(rng.choice(n, size=limit, replace=False))


def check_limit(label: str, value: int | None) -> None:
    """``ValueError`` unless ``value`` is ``None`` or a positive int."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{label} must be a positive integer or None, got {value!r}")


def build(
    name: str,
    split: int,
    raw: RawData,
    *,
    max_train: int | None = None,
    max_test: int | None = None,
    seed: int = 0,
    image: bool = False,
) -> Dataset:
    """Subset (if asked), then standardise with the (subset) training statistics.

    ``max_test`` also caps the number of OOD inputs. Subsets are drawn without replacement and
    keep the original order. ``image=True``: inputs (and ``x_mean``, ``x_std``) shaped as
    ``raw.image_shape`` images, (N, H, W, C); ``ValueError`` for a set that has none.
    """
    if image and raw.image_shape is None:
        raise ValueError(f"{name} is not an image set; image=True needs images")
    train_rng, test_rng, ood_rng = subset_generators(seed, split)
    x_train, y_train, x_test, y_test = raw.x_train, raw.y_train, raw.x_test, raw.y_test
    x_ood, test_inside = raw.x_ood, raw.test_inside
    if (idx := _subset(len(x_train), max_train, train_rng)) is not None:
        x_train, y_train = x_train[idx], y_train[idx]
    if (idx := _subset(len(x_test), max_test, test_rng)) is not None:
        x_test, y_test = x_test[idx], y_test[idx]
        test_inside = None if test_inside is None else test_inside[idx]
    if x_ood is not None and (idx := _subset(len(x_ood), max_test, ood_rng)) is not None:
        x_ood = x_ood[idx]

    dim = x_train.shape[1]
    if raw.pixel_max is not None:
        x_mean, x_std = np.zeros(dim), np.ones(dim)
    else:
        x_mean, x_std = column_stats(np.asarray(x_train, dtype=np.float64))

    shape = tuple(raw.image_shape) if image else (dim,)

    def transform(x: np.ndarray | None) -> np.ndarray | None:
        if x is None:
            return None
        x = np.asarray(x, dtype=np.float64)
        x = x / raw.pixel_max if raw.pixel_max is not None else (x - x_mean) / x_std
        return x.reshape(len(x), *shape)

    if raw.task == "regression":
        y_train = np.asarray(y_train, dtype=np.float64)
        mean, std = column_stats(y_train[:, None])
        y_mean, y_std = float(mean[0]), float(std[0])
        y_train = (y_train - y_mean) / y_std
        y_test = (np.asarray(y_test, dtype=np.float64) - y_mean) / y_std
    else:
        y_mean, y_std = 0.0, 1.0
        y_train = np.asarray(y_train, dtype=np.int64)
        y_test = np.asarray(y_test, dtype=np.int64)

    return Dataset(
        name=name,
        task=raw.task,
        split=split,
        x_train=transform(x_train),
        y_train=y_train,
        x_test=transform(x_test),
        y_test=y_test,
        num_classes=raw.num_classes,
        y_mean=y_mean,
        y_std=y_std,
        x_mean=x_mean.reshape(shape),
        x_std=x_std.reshape(shape),
        x_ood=transform(x_ood),
        ood_name=raw.ood_name,
        x_grid=transform(raw.x_grid),
        source=raw.source,
        test_inside=test_inside,
        regions=raw.regions,
        pixel_max=raw.pixel_max,
    )
