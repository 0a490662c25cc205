"""No module outside ``backends/`` and ``engine/`` names a backend, read from the code: neither a
string that is a registered backend's name (docstrings aside) nor an import of a backend's
modules."""

from __future__ import annotations

import ast
from pathlib import Path

from ppl_bnn.engine.registry import BUILT_IN, backend_names

PACKAGE = Path(__file__).resolve().parents[1] / "ppl_bnn"
#: Where naming a backend is the job: the backends themselves, and their registry.
HOMES = ("backends", "engine")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants in ``tree``."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.add(id(value))
    return out


def backend_mentions(source: str, names: tuple[str, ...]) -> int:
    """How often ``source`` names a backend: string constants equal to one of ``names`` (not
    docstrings), and imports from a built-in backend's package."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs:
            count += 1
        elif isinstance(node, ast.ImportFrom) and node.module:
            count += any(node.module.startswith(p) for p in BUILT_IN)
        elif isinstance(node, ast.Import):
            count += sum(any(a.name.startswith(p) for p in BUILT_IN) for a in node.names)
    return count


def mentions() -> dict[str, int]:
    """Every module outside :data:`HOMES` that names a backend, with its count."""
    names = backend_names()
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        key = path.relative_to(PACKAGE).as_posix()
        if key.split("/")[0] not in HOMES:
            count = backend_mentions(path.read_text(), names)
            if count:
                out[key] = count
    return out


def test_no_module_outside_the_backends_names_one() -> None:
    assert mentions() == {}


def test_a_mention_is_a_name_or_an_import_not_a_docstring() -> None:
    source = (
        'def f(backend="pyro"):\n    """Runs on "numpyro"."""\n'
        "    from ppl_bnn.backends.numpyro import ops\n    return 'numpyro'\n"
    )
    assert backend_mentions(source, ("numpyro", "pyro")) == 3
