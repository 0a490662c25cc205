"""Math as MathML, converted when the site is built (``latex2mathml``): no script, nothing
fetched, so the pages render offline and from a ``file://`` URL in any current browser."""

from __future__ import annotations

from docutils import nodes
from latex2mathml.converter import convert


def _mathml(latex: str, display: str) -> str:
    return convert(latex.strip(), display=display)


def visit_math(self, node: nodes.math) -> None:  # type: ignore[no-untyped-def]
    self.body.append(f'<span class="math">{_mathml(node.astext(), "inline")}</span>')
    raise nodes.SkipNode


def visit_displaymath(self, node: nodes.math_block) -> None:  # type: ignore[no-untyped-def]
    self.body.append(f'<div class="math">{_mathml(node.astext(), "block")}</div>')
    raise nodes.SkipNode


def setup(app):  # type: ignore[no-untyped-def]
    app.add_html_math_renderer(
        "mathml", inline_renderers=(visit_math, None), block_renderers=(visit_displaymath, None)
    )
    return {"parallel_read_safe": True, "parallel_write_safe": True}
