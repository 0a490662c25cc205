"""Reading back rendered reports in tests."""

from __future__ import annotations

import re
from html import unescape


def section(html: str, anchor: str) -> str:
    """The HTML of the section with id ``anchor`` (up to the matching close tag)."""
    start = html.index(f'<section id="{anchor}">')
    depth, pos = 0, start
    for match in re.finditer(r"<section\b|</section>", html[start:]):
        depth += 1 if match.group().startswith("<section") else -1
        if depth == 0:
            pos = start + match.end()
            break
    return html[start:pos]


def tables(fragment: str) -> list[list[list[str]]]:
    """Every table in ``fragment`` as rows of cell texts (header row first)."""
    out = []
    for table in re.findall(r"<table>.*?</table>", fragment, flags=re.S):
        rows = []
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.S):
            cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)
            rows.append([unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
        out.append(rows)
    return out


def row(table: list[list[str]], *keys: str) -> dict[str, str]:
    """The first row whose leading cells are ``keys``, as {header: text}."""
    header = table[0]
    for cells in table[1:]:
        if tuple(cells[: len(keys)]) == keys:
            return dict(zip(header, cells, strict=True))
    raise KeyError(f"no row {keys} in table with header {header}")
