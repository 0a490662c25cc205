"""Figure styling shared by every figure."""

from __future__ import annotations

from ppl_bnn.methods import METHODS
from ppl_bnn.report.style import method_color


def test_every_method_of_the_table_has_its_own_colour():
    colours = [method_color(m.name) for m in METHODS]
    assert len(set(colours)) == len(colours)
    assert method_color("a method not in the table").startswith("#")
