"""Type checks for user-given numbers (``bool`` is not a number here)."""

from __future__ import annotations

import numpy as np


def is_number(value: object) -> bool:
    """A real int or float (numpy scalars included), not a bool."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def is_int(value: object) -> bool:
    """An int (numpy integers included), not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
