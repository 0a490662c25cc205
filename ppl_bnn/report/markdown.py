"""Lay out a report document as Markdown: pipe tables, figures linked from ``figures/``."""

from __future__ import annotations

import re
from html import escape

from ppl_bnn.report.document import (
    PROBLEMS_INTRO,
    PROBLEMS_TITLE,
    Block,
    BulletList,
    Details,
    Document,
    Figure,
    Inline,
    Link,
    Mark,
    Paragraph,
    Scoreboard,
    Section,
    Strong,
    Table,
)


def _escape(text: str) -> str:
    """``text`` as literal Markdown text on one line (markup characters escaped)."""
    out = str(text).replace("\\", "\\\\").replace("|", "\\|")
    for char in "*_`[]<>&#":
        out = out.replace(char, f"\\{char}")
    return out.replace("\r", " ").replace("\n", " ")


def _inline(part: Inline) -> str:
    if isinstance(part, Link):
        return f"[{_escape(part.text)}]({part.url})"
    if isinstance(part, Strong):
        # Emphasis markers must touch the text: keep surrounding spaces outside them.
        text = part.text
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        return f"{lead}**{_escape(text.strip())}**{trail}" if text.strip() else text
    return _escape(str(part))


def _inlines(parts: tuple[Inline, ...]) -> str:
    return "".join(_inline(p) for p in parts)


def _table(table: Table) -> str:
    numeric = table.numeric or tuple(False for _ in table.header)
    lines = []
    if table.caption:
        lines += [f"*{_escape(table.caption)}*", ""]
    lines.append("| " + " | ".join(_escape(h) for h in table.header) + " |")
    lines.append(
        "|"
        + "|".join("---:" if n else "---" for _, n in zip(table.header, numeric, strict=False))
        + "|"
    )
    for row in table.rows:
        lines.append("| " + " | ".join(_inline(c) for c in row) + " |")
    return "\n".join(lines)


def _scoreboard(board: Scoreboard) -> str:
    header = [""] + [f"{title} {column}" for title, columns in board.groups for column in columns]

    def cell(mark: Mark | None) -> str:
        return "\u00b7" if mark is None else _escape(mark.text)

    lines = [f"*{_escape(board.caption)}*", ""] if board.caption else []
    lines.append("| " + " | ".join(_escape(h) for h in header) + " |")
    lines.append("|" + "|".join("---" for _ in header) + "|")
    for label, marks in board.rows:
        lines.append("| " + " | ".join([_escape(label), *(cell(m) for m in marks)]) + " |")
    return "\n".join(lines)


def _block(block: Block, figures_dir: str) -> str:
    if isinstance(block, Paragraph):
        return _inlines(block.parts)
    if isinstance(block, BulletList):
        return "\n".join(f"- {_inlines(item)}" for item in block.items)
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Scoreboard):
        return _scoreboard(block)
    if isinstance(block, Figure):
        caption = _escape(block.caption)
        return f"![{caption}]({figures_dir}/{block.name}.png)\n\n*{caption}*"
    if isinstance(block, Details):
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", block.text)), default=0))
        return (
            f"<details><summary>{escape(block.summary)}</summary>\n\n"
            f"{fence}text\n{block.text}\n{fence}\n\n</details>"
        )
    raise TypeError(f"unknown block {type(block).__name__}")


def _section(section: Section, level: int, figures_dir: str) -> list[str]:
    title = f"{'#' * min(level, 6)} {_escape(section.title)}"
    out = [f'<a id="{section.anchor}"></a>', "", title, ""]
    for block in section.blocks:
        out += [_block(block, figures_dir), ""]
    for child in section.children:
        out += _section(child, level + 1, figures_dir)
    return out


def _toc(sections: list[Section], level: int = 0, depth: int = 2) -> list[str]:
    out = []
    for s in sections:
        out.append(f"{'  ' * level}- [{_escape(s.title)}](#{s.anchor})")
        if level + 1 < depth:
            out += _toc(s.children, level + 1, depth)
    return out


def render_markdown(document: Document, figures_dir: str = "figures") -> str:
    """The document as Markdown; figures are referenced as ``<figures_dir>/<name>.png``."""
    lines = [f"# {_escape(document.title)}", ""]
    if document.progress:
        lines += [f"> {_escape(document.progress)}", ""]
    for block in document.answer:
        lines += [_block(block, figures_dir), ""]
    if document.problems:
        count = len(document.problems)
        lines += [f"> **{PROBLEMS_TITLE}** ({count}): {PROBLEMS_INTRO}.", ">"]
        lines += [f"> - {_inlines(item)}" for item in document.problems]
        lines.append("")
    if document.subtitle:
        lines += [_escape(document.subtitle), ""]
    lines += ["**Contents**", "", *_toc(document.sections), ""]
    for section in document.sections:
        lines += _section(section, 2, figures_dir)
    return "\n".join(lines).rstrip() + "\n"
