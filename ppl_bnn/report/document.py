"""The report as plain data: sections of paragraphs, tables, figures and collapsible text.

Tables and figures are built once into this structure; :mod:`.html` and :mod:`.markdown` only
lay it out, so both outputs always carry the same content.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field

#: The heading of the box listing what a report could not read (a box, not a section: the
#: Summary stays the first section), and what it lists.
PROBLEMS_TITLE = "Problems"
PROBLEMS_INTRO = "what this report could not read, or cannot vouch for"


@dataclass(frozen=True)
class Link:
    """A hyperlink (citations only: a report never loads anything from outside)."""

    text: str
    url: str


@dataclass(frozen=True)
class Strong:
    """Emphasised text (e.g. the best value of a column)."""

    text: str


Inline = str | Link | Strong


@dataclass(frozen=True)
class Paragraph:
    """Running text made of plain strings, links and emphasis."""

    parts: tuple[Inline, ...]

    @classmethod
    def of(cls, *parts: Inline) -> Paragraph:
        """A paragraph from inline parts given as arguments."""
        return cls(tuple(parts))


@dataclass(frozen=True)
class BulletList:
    """An unordered list; each item is a sequence of inline parts."""

    items: tuple[tuple[Inline, ...], ...]


@dataclass(frozen=True)
class Table:
    """A table of already formatted cells.

    Attributes:
        header: Column titles.
        rows: One list of cells per row.
        caption: One sentence saying what the table shows.
        row_classes: Optional CSS class per row (``"published"``, ``"problem"``), or "".
        numeric: Per column, whether its cells are numbers (right-aligned).
    """

    header: tuple[str, ...]
    rows: tuple[tuple[Inline, ...], ...]
    caption: str = ""
    row_classes: tuple[str, ...] = ()
    numeric: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A rendered PNG figure; ``name`` is its file stem under ``figures/``. A notebook shows
    it inline, with its caption."""

    name: str
    png: bytes
    caption: str

    def _repr_png_(self) -> bytes:
        return self.png

    def _repr_html_(self) -> str:
        data = base64.b64encode(self.png).decode("ascii")
        return (
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(self.name)}">'
            f"<figcaption>{html.escape(self.caption)}</figcaption></figure>"
        )


@dataclass(frozen=True)
class Details:
    """Collapsible preformatted text (a traceback, a long table as text)."""

    summary: str
    text: str


@dataclass(frozen=True)
class Mark:
    """One graded cell of a :class:`Scoreboard`: its word, its kind (the grade, which sets its
    colour) and the number behind it (shown on hover)."""

    text: str
    kind: str
    title: str = ""


@dataclass(frozen=True)
class Scoreboard:
    """A grid of marks: one row per label, its columns grouped under a two-level header.

    Attributes:
        groups: ``(group title, (column title, ...))`` in order, e.g. a dataset and its backends.
        rows: ``(label, marks)``, one mark (or None: nothing there) per column.
        caption: What the grades mean.
    """

    groups: tuple[tuple[str, tuple[str, ...]], ...]
    rows: tuple[tuple[str, tuple[Mark | None, ...]], ...]
    caption: str = ""


Block = Paragraph | BulletList | Table | Figure | Details | Scoreboard


@dataclass
class Section:
    """A titled section; ``anchor`` is unique within the document."""

    title: str
    anchor: str
    blocks: list[Block] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)

    def is_empty(self) -> bool:
        """True when neither this section nor any child holds a block."""
        return not self.blocks and all(c.is_empty() for c in self.children)

    def figures(self) -> list[Figure]:
        """Every figure in this section and its children, in document order."""
        out = [b for b in self.blocks if isinstance(b, Figure)]
        for child in self.children:
            out.extend(child.figures())
        return out


@dataclass
class Document:
    """A whole report.

    Attributes:
        title, subtitle: Its heading.
        sections: Its sections, in order.
        problems: What the report could not read or cannot vouch for, one item each: shown in a
            box right under the title, before the first section.
        progress: Where the results are incomplete (a sweep still running, or stopped before
            its end), what is done and what is pending: shown first, above everything else;
            empty for a finished sweep.
        answer: The answer, shown right under the title (and the progress box), before the
            problems, the suite's description and the contents: the recommendations and the
            scoreboard.
        verdict: The same answer as JSON-ready data (``summary.json``), one entry per dataset.
    """

    title: str
    subtitle: str
    sections: list[Section]
    problems: tuple[tuple[Inline, ...], ...] = ()
    progress: str = ""
    answer: tuple[Block, ...] = ()
    verdict: tuple[dict, ...] = ()

    def figures(self) -> list[Figure]:
        """Every figure, in document order."""
        return [f for s in self.sections for f in s.figures()]


def slug(*parts: object) -> str:
    """An anchor / file-name-safe identifier built from ``parts``."""
    text = "-".join(str(p) for p in parts if p is not None and str(p) != "")
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"
