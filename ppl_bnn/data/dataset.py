"""The :class:`Dataset` container: one train/test split, standardised, with its transform."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TASKS = ("regression", "classification")


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """One train/test split of a data set, ready for a BNN.

    Inputs are standardised per column with the *training* mean and standard deviation (a column
    constant on the training rows gets std 1); regression targets likewise. Image sets (digits,
    MNIST, Fashion-MNIST) are instead scaled to [0, 1] by the largest possible pixel value and not
    standardised (``x_mean = 0``, ``x_std = 1``). ``x_test``, ``x_ood`` and ``x_grid`` are
    transformed exactly like ``x_train``. Instances compare by identity (arrays define no ``==``).

    Attributes:
        name: the data set, e.g. ``"sine"``, ``"bostonHousing"``, ``"mnist"``.
        task: ``"regression"`` or ``"classification"``.
        split: which train/test split (see :func:`ppl_bnn.data.num_splits`).
        x_train: ``(N, D)`` float64 inputs, or images ``(N, H, W, C)`` (``image=True`` of
            :func:`~ppl_bnn.data.load_dataset`; then every input array, ``x_mean`` and ``x_std``
            have that per-example shape).
        y_train: ``(N,)`` float64 standardised targets, or int64 labels ``0..K-1``.
        x_test: ``(M, D)`` float64 inputs.
        y_test: ``(M,)`` like ``y_train``.
        num_classes: ``K`` for classification, ``None`` for regression.
        y_mean: regression: original ``y = y_std * y_standardised + y_mean``; 0.0 otherwise.
        y_std: see ``y_mean``; 1.0 for classification.
        x_mean: ``(D,)`` the input shift used.
        x_std: ``(D,)`` the input scale used.
        x_ood: out-of-distribution inputs (classification sets), or ``None``.
        ood_name: what ``x_ood`` is, e.g. ``"uniform noise"``, ``"fashion-mnist"``.
        x_grid: 1-D sets only: a dense ``(G, 1)`` input grid for band figures.
        source: one line saying where the data comes from.
        test_inside: ``(M,)`` bool, for sets whose test inputs reach where no training input
            lies: True where a test input lies where the training inputs do; else ``None``.
        regions: the names of the two parts ``test_inside`` splits the test set into, inside
            first (e.g. ``("in range", "out of range")``); ``None`` without ``test_inside``.
        pixel_max: image sets: the inputs were divided by this (the largest pixel value)
            instead of standardised; ``None`` for standardised inputs.
    """

    name: str
    task: str
    split: int
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int | None
    y_mean: float
    y_std: float
    x_mean: np.ndarray
    x_std: np.ndarray
    x_ood: np.ndarray | None = None
    ood_name: str | None = None
    x_grid: np.ndarray | None = None
    source: str = ""
    test_inside: np.ndarray | None = None
    regions: tuple[str, str] | None = None
    pixel_max: float | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.x_train.ndim not in (2, 4):
            raise ValueError(
                f"x_train must be 2-D (n, d) or images (n, h, w, c), got shape {self.x_train.shape}"
            )
        shape = self.input_shape
        for label, x in (("x_train", self.x_train), ("x_test", self.x_test)):
            if x.shape[1:] != shape or x.dtype != np.float64:
                raise ValueError(
                    f"{label} must be float64 of shape (n, {', '.join(map(str, shape))}), got "
                    f"{x.dtype} {x.shape}"
                )
        for label, x in (("x_ood", self.x_ood), ("x_grid", self.x_grid)):
            if x is not None and x.shape[1:] != shape:
                raise ValueError(
                    f"{label} must have shape (n, {', '.join(map(str, shape))}), got {x.shape}"
                )
        for label, x in (("x_mean", self.x_mean), ("x_std", self.x_std)):
            if x.shape != shape:
                raise ValueError(f"{label} must have shape {shape}, got {x.shape}")
        for label, x, y in (
            ("train", self.x_train, self.y_train),
            ("test", self.x_test, self.y_test),
        ):
            if y.shape != (x.shape[0],):
                raise ValueError(f"y_{label} must have shape ({x.shape[0]},), got {y.shape}")
        if (self.test_inside is None) != (self.regions is None):
            raise ValueError("test_inside and regions must be given together")
        if self.test_inside is not None and (
            self.test_inside.dtype != np.bool_ or self.test_inside.shape != (self.n_test,)
        ):
            raise ValueError(
                f"test_inside must be bool of shape ({self.n_test},), got "
                f"{self.test_inside.dtype} {self.test_inside.shape}"
            )
        if self.task == "regression":
            if self.num_classes is not None:
                raise ValueError("num_classes must be None for regression")
            if self.y_train.dtype != np.float64 or self.y_test.dtype != np.float64:
                raise ValueError("regression targets must be float64")
            if not self.y_std > 0:
                raise ValueError(f"y_std must be positive, got {self.y_std}")
        else:
            if not isinstance(self.num_classes, int) or self.num_classes < 2:
                raise ValueError(f"num_classes must be an int >= 2, got {self.num_classes!r}")
            for label, y in (("y_train", self.y_train), ("y_test", self.y_test)):
                if y.dtype != np.int64 or (y.size and (y.min() < 0 or y.max() >= self.num_classes)):
                    raise ValueError(f"{label} must be int64 labels in 0..{self.num_classes - 1}")

    @property
    def n_train(self) -> int:
        """Number of training points."""
        return int(self.x_train.shape[0])

    @property
    def n_test(self) -> int:
        """Number of test points."""
        return int(self.x_test.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One input's shape: ``(D,)``, or ``(H, W, C)`` for images loaded with ``image=True``."""
        return tuple(int(n) for n in self.x_train.shape[1:])

    @property
    def input_dim(self) -> int:
        """Number of input values ``D`` (H W C for images)."""
        return int(np.prod(self.input_shape))

    def y_to_original(self, y_standardised: np.ndarray | float) -> np.ndarray:
        """Regression targets (or predictive means) back in original units.

        A predictive standard deviation converts by multiplying with ``y_std`` alone.

        Raises:
            ValueError: the data set is a classification set.
        """
        if self.task != "regression":
            raise ValueError(f"{self.name} is a classification set: its labels are not scaled")
        return np.asarray(y_standardised, dtype=np.float64) * self.y_std + self.y_mean

    def x_to_original(self, x: np.ndarray) -> np.ndarray:
        """Inputs (e.g. ``x_grid``) back in original units."""
        return np.asarray(x, dtype=np.float64) * self.x_std + self.x_mean

    def __repr__(self) -> str:
        ood = "" if self.x_ood is None else f", x_ood={self.x_ood.shape} ({self.ood_name})"
        classes = "" if self.num_classes is None else f", num_classes={self.num_classes}"
        return (
            f"Dataset(name={self.name!r}, task={self.task!r}, split={self.split}, "
            f"n_train={self.n_train}, n_test={self.n_test}, input_dim={self.input_dim}"
            f"{classes}{ood})"
        )
