"""No function of the package is longer than :data:`MAX_LINES`, read from the code: from its
``def`` to its last line, less its docstring (documentation, not logic)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ppl_bnn"
MAX_LINES = 80


def _docstring_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = node.body[0]
    value = first.value if isinstance(first, ast.Expr) else None
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return node.end_lineno - node.lineno + 1 - _docstring_lines(node)


def function_lengths() -> dict[str, int]:
    """Every function's length, less its docstring, by ``<path in the package>:<name>``
    (nested functions count within theirs, and on their own)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = _length(node)
                key = f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"
                out[key] = max(length, out.get(key, 0))
    return out


def test_no_function_is_longer_than_the_limit() -> None:
    over = {k: n for k, n in function_lengths().items() if n > MAX_LINES}
    assert over == {}


def test_the_length_leaves_the_docstring_out() -> None:
    source = 'def f():\n    """Two\n    lines."""\n    return 1\n'
    (node,) = ast.parse(source).body
    assert _length(node) == 2
