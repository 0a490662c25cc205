"""The fixed style of methods and backends, the same in every figure: a colour per method (each
method of the table its own), a marker and a line style per backend."""

from __future__ import annotations

from ppl_bnn.bench.cell import TUNED_SUFFIX, base_method
from ppl_bnn.report.load import BACKEND_ORDER, METHOD_ORDER

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
    "#e6550d",
]
#: Markers and line styles, one per backend in :data:`BACKEND_ORDER`, then the last for any other.
_MARKERS = ("o", "s", "^")
_LINESTYLES = ("-", "--", ":")


#: A tuned contestant's colour: its method's, this much of the way to black.
_TUNED_DARKENING = 0.3


def _darker(colour: str, share: float) -> str:
    """``colour`` (``#rrggbb``) moved ``share`` of the way to black."""
    channels = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(c * (1 - share)):02x}" for c in channels)


def method_color(method: str) -> str:
    """A fixed colour per method, the same in every figure (each method of the table its own:
    the palette is at least as long as the table, tested); a tuned contestant (``map (tuned)``)
    takes a darker shade of its method's."""
    if method.endswith(TUNED_SUFFIX):
        return _darker(method_color(base_method(method)), _TUNED_DARKENING)
    if method in METHOD_ORDER:
        return _PALETTE[METHOD_ORDER.index(method)]
    return _PALETTE[(len(METHOD_ORDER) + sum(map(ord, method))) % len(_PALETTE)]


def _per_backend(backend: str, styles: tuple[str, ...]) -> str:
    order = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else len(styles)
    return styles[min(order, len(styles) - 1)]


def backend_marker(backend: str) -> str:
    """A fixed marker per backend (circles for NumPyro, squares for Pyro)."""
    return _per_backend(backend, _MARKERS)


def backend_linestyle(backend: str) -> str:
    """A fixed line style per backend (solid NumPyro, dashed Pyro)."""
    return _per_backend(backend, _LINESTYLES)
