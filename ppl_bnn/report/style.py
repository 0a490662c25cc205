"""The fixed style of methods and backends, the same in every figure: a colour per method (each
method of the table its own), a marker and a line style per backend."""

from __future__ import annotations

from ppl_bnn.report.load import METHOD_ORDER

_PALETTE = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
    "#ad494a",
    "#637939",
    "#8c6d31",
    "#7b4173",
    "#3182bd",
]
_MARKERS = {"numpyro": "o", "pyro": "s"}
_LINESTYLES = {"numpyro": "-", "pyro": "--"}


def method_color(method: str) -> str:
    """A fixed colour per method, the same in every figure (each method of the table its own:
    the palette is at least as long as the table, tested)."""
    if method in METHOD_ORDER:
        return _PALETTE[METHOD_ORDER.index(method)]
    return _PALETTE[(len(METHOD_ORDER) + sum(map(ord, method))) % len(_PALETTE)]


def backend_marker(backend: str) -> str:
    """A fixed marker per backend."""
    return _MARKERS.get(backend, "^")


def backend_linestyle(backend: str) -> str:
    """A fixed line style per backend (solid NumPyro, dashed Pyro)."""
    return _LINESTYLES.get(backend, ":")
