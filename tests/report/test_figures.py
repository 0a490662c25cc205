"""Figure styling shared by every figure."""

from __future__ import annotations

import os
import subprocess
import sys

from ppl_bnn.methods import METHODS
from ppl_bnn.report.style import method_color


def test_every_method_of_the_table_has_its_own_colour():
    colours = [method_color(m.name) for m in METHODS]
    assert len(set(colours)) == len(colours)
    assert method_color("a method not in the table").startswith("#")


def test_a_tuned_contestant_takes_a_darker_shade_of_its_methods_colour():
    table = {method_color(m.name) for m in METHODS}
    tuned = method_color("map (tuned)")
    assert tuned not in table and tuned != method_color("map")

    def channels(colour: str) -> list[int]:
        return [int(colour[i : i + 2], 16) for i in (1, 3, 5)]

    assert all(t < b for t, b in zip(channels(tuned), channels(method_color("map")), strict=True))


def test_importing_the_library_leaves_the_users_matplotlib_backend_alone():
    """A notebook's backend (here the one ``MPLBACKEND`` names) survives ``import ppl_bnn`` and
    the report's figures, which still render to PNG under it."""
    script = (
        "import matplotlib, ppl_bnn, ppl_bnn.report.figures as f\n"
        "from matplotlib.figure import Figure\n"
        "fig = Figure(); fig.add_subplot().plot([0, 1])\n"
        "png = f._png(fig)\n"
        "print(matplotlib.get_backend(), png[:4] == b'\\x89PNG')\n"
    )
    env = {**os.environ, "MPLBACKEND": "svg"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["svg", "True"]
