"""The package's import graph, read from the code: no circles, and no module imports a module of
a layer above its own (``docs/architecture.md`` draws the layers).

Only imports at a module's top level count: those inside a function run when it is called (a
backend's modules, found by name through :mod:`ppl_bnn.engine.registry`) and those under
``if TYPE_CHECKING:`` never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ppl_bnn"

#: Bottom to top: a module may import its own layer's modules and those of the layers below.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "ppl_bnn.keys",
        "ppl_bnn.seeding",
        "ppl_bnn.timing",
        "ppl_bnn.files",
        "ppl_bnn.devices",
        "ppl_bnn.defaults",
        "ppl_bnn.processes",
    ),
    ("ppl_bnn.engine", "ppl_bnn.versions"),
    ("ppl_bnn.model", "ppl_bnn.layers", "ppl_bnn.priors"),
    (
        "ppl_bnn.predictive",
        "ppl_bnn.metrics",
        "ppl_bnn.data",
        "ppl_bnn.units",
        "ppl_bnn.prediction_table",
    ),
    ("ppl_bnn.methods",),
    ("ppl_bnn.backends",),
    (
        "ppl_bnn.results",
        "ppl_bnn.fit",
        "ppl_bnn.fit_support",
        "ppl_bnn.reference",
        "ppl_bnn.runtime",
    ),
    (
        "ppl_bnn.bench",
        "ppl_bnn.report",
        "ppl_bnn.compare",
        "ppl_bnn.comparison",
        "ppl_bnn.cli",
        "ppl_bnn.commands",
    ),
)


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules ``path`` imports at its top level (``from pkg import mod`` counts
    as the submodule)."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in modules else node.module)
    return out


def _layer(module: str) -> int:
    """The layer of the longest prefix that names ``module`` (the package itself is on top)."""
    best = (len(LAYERS), 0)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(f"{prefix}.")) and len(prefix) > best[1]:
                best = (index, len(prefix))
    return best[0]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) for name, path in modules.items()}


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = sorted(
        (module, imported)
        for module, imports in _graph().items()
        for imported in imports
        if _layer(imported) > _layer(module)
    )
    assert upward == []


def test_the_import_graph_has_no_circles() -> None:
    graph = _graph()
    finished: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError(" -> ".join([*path[path.index(module) :], module]))
        if module in finished:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        finished.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in _graph() if m != "ppl_bnn" and _layer(m) == len(LAYERS)]
    assert unplaced == []
