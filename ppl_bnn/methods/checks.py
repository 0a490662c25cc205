"""Checks that method options share; each raises ``ValueError`` naming the option and value."""

from __future__ import annotations

import numpy as np


def check_positive_int(name: str, value: object, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_positive_float(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.integer | np.floating)
        or not (0 < value < float("inf"))
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


def check_probability(name: str, value: object) -> None:
    check_positive_float(name, value)
    if not value < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"unknown {name} {value!r}; available: {', '.join(choices)}")


def check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_batch_size(batch_size: int, num_data: int) -> int:
    """``batch_size`` if it fits the data; ``ValueError`` otherwise."""
    if batch_size > num_data:
        raise ValueError(f"batch_size {batch_size} exceeds the {num_data} training points")
    return batch_size
