"""Lay out a report document as one self-contained HTML page (inline CSS, base64 PNG figures)."""

from __future__ import annotations

import base64
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
    slug,
)

CSS = """
:root { --fg: #1d2329; --muted: #5b6670; --line: #d8dee4; --head: #f1f4f7; --accent: #1f5f99;
        --problem: #fff4e5; --published: #eef6ee; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); margin: 0 auto; max-width: 1280px; padding: 1.2em 2em 4em;
       overflow-wrap: anywhere; }
h1 { font-size: 1.7em; margin: 0.2em 0; }
h2 { font-size: 1.35em; border-bottom: 2px solid var(--line); padding-bottom: 0.2em;
     margin-top: 2.2em; }
h3 { font-size: 1.12em; margin-top: 1.6em; }
h4 { font-size: 1em; margin-top: 1.3em; color: var(--muted); }
a { color: var(--accent); }
.subtitle { color: var(--muted); margin-top: 0; }
nav.toc { background: var(--head); border: 1px solid var(--line); border-radius: 6px;
          padding: 0.6em 1.2em; margin: 1em 0 1.5em; columns: 2; column-gap: 2em; }
nav.toc h2 { border: 0; margin: 0 0 0.3em; font-size: 1.05em; column-span: all; }
nav.toc ol { margin: 0; padding-left: 1.3em; }
nav.toc li { break-inside: avoid; }
.table-wrap { max-height: max(36em, 85vh); max-width: 100%; width: fit-content; overflow: auto;
              border: 1px solid var(--line); border-radius: 4px; margin: 0.4em 0 1.2em; }
table { border-collapse: separate; border-spacing: 0; font-size: 12.5px; width: max-content;
        overflow-wrap: normal; }
caption { caption-side: top; text-align: left; color: var(--muted); padding: 0.45em 0.6em;
          font-size: 12.5px; min-width: min(40em, 100vw - 6em); max-width: 70em;
          overflow-wrap: anywhere; }
th, td { padding: 0.28em 0.6em; border-bottom: 1px solid var(--line); vertical-align: top; }
td { max-width: 32em; }
thead th { position: sticky; top: 0; background: var(--head); text-align: left; z-index: 1;
           border-bottom: 2px solid var(--line); white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:hover { background: #f7f9fb; }
tr.problem { background: var(--problem); }
tr.published { background: var(--published); font-style: italic; }
figure { margin: 0.8em 0 1.6em; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
figcaption { color: var(--muted); font-size: 12.5px; max-width: 70em; margin-top: 0.3em; }
details { margin: 0.3em 0; }
details summary { cursor: pointer; color: var(--accent); }
pre { background: var(--head); padding: 0.6em; overflow: auto; font-size: 12px;
      border-radius: 4px; max-height: 30em; }
ul.defs li { margin: 0.1em 0; }
aside.problems { background: var(--problem); border: 1px solid #e3b35c; border-radius: 6px;
                 padding: 0.5em 1.2em; margin: 1em 0 1.5em; }
aside.problems p { margin: 0.3em 0; }
aside.problems ul { margin: 0.3em 0; padding-left: 1.3em; }
aside.progress { background: #eef4fb; border: 1px solid #9bbbe0; border-radius: 6px;
                 padding: 0.5em 1.2em; margin: 1em 0; }
.answer ul { margin: 0.4em 0 0.6em; padding-left: 1.2em; }
.answer li { margin: 0.15em 0; }
.scoreboard-row { display: flex; gap: 1.5em; align-items: flex-start; }
.scoreboard-row .legend { color: var(--muted); font-size: 12.5px; max-width: 28em; margin: 0; }
.scoreboard { margin: 0.2em 0 0.6em; flex: none; }
.scoreboard table { font-size: 12px; }
.scoreboard th, .scoreboard td { padding: 0.1em 0.5em; }
.scoreboard tbody th { text-align: left; font-weight: normal; white-space: nowrap; }
.scoreboard thead th { text-align: center; }
.scoreboard td { text-align: center; white-space: nowrap; cursor: help; }
.scoreboard td.none { cursor: default; color: var(--muted); }
.mark-trust { background: #1a7f37; color: #fff; font-weight: 600; }
.mark-as-good { background: #b4e2c0; }
.mark-undecided { background: #fff; border: 1px dashed #8c959f; }
.mark-worse { background: #eceff2; color: var(--muted); }
.mark-avoid { background: #f3b8b3; }
.mark-not-judged { background: #fbe5b0; }
details.about { margin: 0.6em 0 1em; }
details.about[open] { padding-bottom: 0.4em; }
"""


def _inline(part: Inline) -> str:
    if isinstance(part, Link):
        external = part.url.startswith(("http://", "https://"))
        rel = ' rel="noopener noreferrer"' if external else ""
        return f'<a href="{escape(part.url)}"{rel}>{escape(part.text)}</a>'
    if isinstance(part, Strong):
        return f"<strong>{escape(part.text)}</strong>"
    return escape(str(part))


def _inlines(parts: tuple[Inline, ...]) -> str:
    return "".join(_inline(p) for p in parts)


def _table(table: Table) -> str:
    numeric = table.numeric or tuple(False for _ in table.header)
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if n else f"<th>{escape(h)}</th>"
        for h, n in zip(table.header, numeric, strict=False)
    )
    body = []
    for i, row in enumerate(table.rows):
        cls = table.row_classes[i] if i < len(table.row_classes) else ""
        attr = f' class="{cls}"' if cls else ""
        tds = "".join(
            f'<td class="num">{_inline(c)}</td>' if n else f"<td>{_inline(c)}</td>"
            for c, n in zip(row, numeric, strict=False)
        )
        body.append(f"<tr{attr}>{tds}</tr>")
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    return (
        f'<div class="table-wrap"><table>{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (
        f'<figure id="fig-{escape(figure.name)}"><img src="data:image/png;base64,{data}" '
        f'alt="{escape(figure.caption)}"><figcaption>{escape(figure.caption)}</figcaption></figure>'
    )


def _mark(mark: Mark | None) -> str:
    if mark is None:
        return '<td class="none">\u00b7</td>'
    title = f' title="{escape(mark.title)}"' if mark.title else ""
    return f'<td class="mark-{slug(mark.kind)}"{title}>{escape(mark.text)}</td>'


def _scoreboard(board: Scoreboard) -> str:
    top = "".join(
        f'<th colspan="{len(columns)}">{escape(title)}</th>' for title, columns in board.groups
    )
    sub = "".join(f"<th>{escape(c)}</th>" for _, columns in board.groups for c in columns)
    body = "".join(
        f"<tr><th>{escape(label)}</th>{''.join(_mark(m) for m in marks)}</tr>"
        for label, marks in board.rows
    )
    legend = f'<p class="legend">{escape(board.caption)}</p>' if board.caption else ""
    return (
        '<div class="scoreboard-row"><div class="table-wrap scoreboard"><table><thead><tr>'
        f'<th rowspan="2"></th>{top}</tr><tr>{sub}</tr></thead><tbody>{body}</tbody></table>'
        f"</div>{legend}</div>"
    )


def _block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{_inlines(block.parts)}</p>"
    if isinstance(block, BulletList):
        items = "".join(f"<li>{_inlines(item)}</li>" for item in block.items)
        return f'<ul class="defs">{items}</ul>'
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Figure):
        return _figure(block)
    if isinstance(block, Scoreboard):
        return _scoreboard(block)
    if isinstance(block, Details):
        return (
            f"<details><summary>{escape(block.summary)}</summary>"
            f"<pre>{escape(block.text)}</pre></details>"
        )
    raise TypeError(f"unknown block {type(block).__name__}")


def _section(section: Section, level: int) -> str:
    tag = f"h{min(level, 6)}"
    parts = [f'<section id="{escape(section.anchor)}"><{tag}>{escape(section.title)}</{tag}>']
    parts += [_block(b) for b in section.blocks]
    parts += [_section(c, level + 1) for c in section.children]
    parts.append("</section>")
    return "\n".join(parts)


def _toc(sections: list[Section], depth: int = 2) -> str:
    def items(secs: list[Section], level: int) -> str:
        out = []
        for s in secs:
            sub = items(s.children, level + 1) if level < depth and s.children else ""
            out.append(f'<li><a href="#{escape(s.anchor)}">{escape(s.title)}</a>{sub}</li>')
        return f"<ol>{''.join(out)}</ol>"

    return f'<nav class="toc"><h2>Contents</h2>{items(sections, 1)}</nav>'


def _problems(document: Document) -> str:
    """The Problems box (empty when there are none): an ``aside``, not a section."""
    if not document.problems:
        return ""
    items = "".join(f"<li>{_inlines(item)}</li>" for item in document.problems)
    return (
        f'<aside class="problems" role="alert" aria-label="{PROBLEMS_TITLE}"><p><strong>'
        f"{PROBLEMS_TITLE}</strong> ({len(document.problems)}): {PROBLEMS_INTRO}.</p>"
        f"<ul>{items}</ul></aside>\n"
    )


def _progress(document: Document) -> str:
    """The box saying the results are incomplete (empty for a finished sweep)."""
    if not document.progress:
        return ""
    return f'<aside class="progress" role="status"><p>{escape(document.progress)}</p></aside>'


def _answer(document: Document) -> str:
    """The answer under the title: the recommendations and the scoreboard."""
    if not document.answer:
        return ""
    blocks = "".join(_block(b) for b in document.answer)
    return f'<div id="answer" class="answer" role="region" aria-label="Answer">{blocks}</div>\n'


def _about(document: Document) -> str:
    """The suite's description and the contents, folded (open where there is no answer)."""
    subtitle = f'<p class="subtitle">{escape(document.subtitle)}</p>' if document.subtitle else ""
    opened = "" if document.answer else " open"
    return (
        f'<details class="about"{opened}><summary>About this suite, and the contents</summary>'
        f"{subtitle}{_toc(document.sections)}</details>\n"
    )


def render_html(document: Document) -> str:
    """The document as a complete HTML page that loads nothing from outside: the title, the
    progress box, the answer, the problems box, then the suite's description and the contents
    folded, then the sections."""
    body = "\n".join(_section(s, 2) for s in document.sections)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(document.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<header><h1>{escape(document.title)}</h1>{_progress(document)}</header>\n"
        f"{_answer(document)}{_problems(document)}{_about(document)}"
        f"<main>\n{body}\n</main>\n</body>\n</html>\n"
    )
