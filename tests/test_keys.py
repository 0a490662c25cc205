"""Content keys: equal inputs give equal keys in any process; what differs in a way that changes
a result or a program gives another key."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ppl_bnn.keys import content_key


@dataclass(frozen=True)
class _Options:
    steps: int
    start: dict = field(default_factory=dict, compare=False)


def test_arrays_are_keyed_by_their_bytes_dtype_and_shape() -> None:
    a = np.arange(6, dtype=np.float32)
    assert content_key(a) == content_key(a.copy())
    assert content_key(a) != content_key(a.reshape(2, 3))
    assert content_key(a) != content_key(a.astype(np.float64))
    b = a.copy()
    b[3] = np.nextafter(b[3], np.float32(10))
    assert content_key(a) != content_key(b)


def test_a_dataclass_is_keyed_by_the_fields_of_its_equality() -> None:
    """A field declared ``compare=False`` (a start that programs take as an argument) does not
    key them; every other field does, and so does the class."""
    assert content_key(_Options(5, {"w": np.zeros(2)})) == content_key(_Options(5, {"w": 1}))
    assert content_key(_Options(5)) != content_key(_Options(6))

    @dataclass(frozen=True)
    class Other:
        steps: int

    assert content_key(_Options(5)) != content_key(Other(5))
