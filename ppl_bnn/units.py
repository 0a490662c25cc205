"""The units a fit's data came in, beside the standardised ones it was fitted in.

A suite or ``compare`` fits every model to standardised data: each input column
:math:`\\tilde x = (x - \\mu_x) / s_x` with the training split's mean and std (images:
:math:`\\tilde x = x / p_{\\max}`), and a regression target :math:`\\tilde y = (y - \\mu_y) / s_y`.
:class:`Units` holds that map, so that a saved fit predicts from inputs in the data's own units
and returns the predictive in the target's: :math:`f = s_y \\tilde f + \\mu_y` for every draw and
:math:`\\sigma = s_y \\tilde\\sigma` for the noise. Class probabilities need no map.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ppl_bnn.predictive import Prediction


@dataclass(frozen=True, eq=False)
class Units:
    """The affine map from the data's units to the fitted ones.

    Attributes:
        x_mean, x_std: Per input value (one example's shape), subtracted then divided by.
        y_mean, y_std: A regression target's shift and scale (0 and 1 for classes).
    """

    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float = 0.0
    y_std: float = 1.0

    def __post_init__(self) -> None:
        x_mean = np.asarray(self.x_mean, dtype=np.float64)
        x_std = np.asarray(self.x_std, dtype=np.float64)
        if x_mean.shape != x_std.shape:
            raise ValueError(f"x_mean {x_mean.shape} and x_std {x_std.shape} differ in shape")
        if not (np.all(np.isfinite(x_mean)) and np.all(x_std > 0) and np.all(np.isfinite(x_std))):
            raise ValueError("units need finite input means and positive, finite input stds")
        if not (np.isfinite(self.y_mean) and np.isfinite(self.y_std) and self.y_std > 0):
            raise ValueError(f"units need a finite y_mean and a positive y_std, got {self.y_std}")
        object.__setattr__(self, "x_mean", x_mean)
        object.__setattr__(self, "x_std", x_std)

    @classmethod
    def of(cls, data: Any) -> Units:
        """The units of a :class:`~ppl_bnn.data.dataset.Dataset` split (images: divided by
        their largest pixel value)."""
        if data.pixel_max is not None:
            shape = data.input_shape
            return cls(np.zeros(shape), np.full(shape, float(data.pixel_max)))
        return cls(data.x_mean, data.x_std, float(data.y_mean), float(data.y_std))

    def inputs(self, x: np.ndarray) -> np.ndarray:
        """Inputs in the data's units, standardised as the fit's were."""
        return (np.asarray(x, dtype=np.float64) - self.x_mean) / self.x_std

    def prediction(self, pred: Prediction) -> Prediction:
        """A fitted-units predictive in the target's own units (classes: unchanged)."""
        if not pred.is_regression:
            return pred
        noise = None if pred.noise_std is None else np.asarray(pred.noise_std) * self.y_std
        return replace(pred, f=np.asarray(pred.f) * self.y_std + self.y_mean, noise_std=noise)

    def to_dict(self) -> dict[str, Any]:
        return {
            "x_mean": self.x_mean.tolist(),
            "x_std": self.x_std.tolist(),
            "y_mean": self.y_mean,
            "y_std": self.y_std,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Units:
        return cls(
            np.asarray(data["x_mean"]), np.asarray(data["x_std"]), data["y_mean"], data["y_std"]
        )
