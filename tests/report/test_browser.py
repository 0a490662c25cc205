"""The HTML report in a real browser: no errors, nothing loaded from outside, nothing wider than a
1280-px window, every figure decoded, the answer (recommendations and scoreboard) inside the
first 1280 x 800 screen, the Summary the first section, published rows shaded and linked.

Drives Debian's ``chromium`` through playwright (``playwright install`` cannot work offline); the
browser tests skip when either is missing, the layout test without a browser always runs.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure as MplFigure

from ppl_bnn.bench.suite import load_suite
from ppl_bnn.reference import PREDICTIONS_FILE
from ppl_bnn.report import render_report
from ppl_bnn.report.answer import answer_blocks
from ppl_bnn.report.document import (
    BulletList,
    Details,
    Document,
    Figure,
    Paragraph,
    Section,
    Table,
)
from ppl_bnn.report.html import CSS, render_html
from ppl_bnn.report.recommend import recommend, with_cost
from ppl_bnn.report.reference_entries import ReferenceEntry
from tests.report.pruning_records import write_pruning_suite

pytestmark = pytest.mark.runtime(40)  # seconds on 2 cores, with the other report modules

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 900}
WIDE = 60  # columns of the wide table, far wider than the window
UNBROKEN = "x" * 400  # a word no line can hold

# What sticks out of the window (outermost boxes, and text not inside a scrolling box), for
# failure messages.
OVERFLOWING_JS = """() => {
  const w = window.innerWidth + 0.5, out = [];
  const name = (el) => `${el.tagName.toLowerCase()}.${el.className}#${el.id}`;
  const scrolls = (node) => {
    for (let el = node.parentElement; el; el = el.parentElement)
      if (getComputedStyle(el).overflowX !== 'visible') return true;
    return false;
  };
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.right > w && el.parentElement.getBoundingClientRect().right <= w && !scrolls(el))
      out.push(`${name(el)} ${Math.round(r.width)}px`);
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const range = document.createRange();
    range.selectNodeContents(walker.currentNode);
    const r = range.getBoundingClientRect();
    if (r.right > w && !scrolls(walker.currentNode))
      out.push(`text in ${name(walker.currentNode.parentElement)} ${Math.round(r.width)}px`);
  }
  return out.slice(0, 20);
}"""
IMAGES_JS = """async () => Promise.all([...document.images].map(async (img) => {
  let decoded = true;
  try { await img.decode(); } catch (e) { decoded = String(e); }
  return {src: img.src.slice(0, 40), complete: img.complete, naturalWidth: img.naturalWidth,
          decoded: decoded};
}))"""


@dataclass
class Opened:
    """A page opened in the browser and what it did while loading."""

    page: Any
    path: Path
    url: str
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium, or a skip saying what is missing."""
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} missing (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield launched
        launched.close()


@contextmanager
def _open(browser: Any, path: Path, viewport: dict[str, int] = VIEWPORT) -> Iterator[Opened]:
    """``path`` loaded in a fresh page (1280 x 900 unless told), recording every request and
    error."""
    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        opened = Opened(page, path, path.resolve().as_uri())
        page.on("request", lambda request: opened.requests.append(request.url))
        page.on(
            "console",
            lambda msg: opened.console_errors.append(msg.text) if msg.type == "error" else None,
        )
        page.on("pageerror", lambda error: opened.page_errors.append(str(error)))
        page.goto(opened.url, wait_until="load")
        yield opened
    finally:
        context.close()


@pytest.fixture(scope="module")
def report(browser: Any, request: pytest.FixtureRequest) -> Iterator[Opened]:
    """The tiny suite's ``index.html`` at 1280 x 900 (the suite is only fitted with a browser)."""
    report_dir: Path = request.getfixturevalue("report_dir")
    with _open(browser, report_dir / "index.html") as opened:
        yield opened


def _wide_document() -> Document:
    """Everything that could push a page sideways: a wide table, unbroken words, a huge figure."""
    fig = MplFigure(figsize=(30, 1), dpi=100)
    fig.add_subplot().plot([0, 1], [0, 1])
    png = io.BytesIO()
    fig.savefig(png, format="png")
    header = tuple(f"column_{i}" for i in range(WIDE))
    table = Table(
        header=header,
        rows=(tuple(f"{i}.123456" for i in range(WIDE)),),
        caption=f"caption {UNBROKEN}",
        numeric=(True,) * WIDE,
    )
    blocks = [
        Paragraph.of(f"paragraph {UNBROKEN}"),
        BulletList(((UNBROKEN,),)),
        table,
        Table(header=("a", "b"), rows=((UNBROKEN, "b"),)),
        Figure("huge", png.getvalue(), f"figure {UNBROKEN}"),
        Details("traceback", f"line {UNBROKEN}"),
    ]
    return Document(
        f"title {UNBROKEN}",
        f"subtitle {UNBROKEN}",
        [Section("Summary", "summary", blocks), Section(f"section {UNBROKEN}", "long", blocks)],
    )


def test_a_wide_table_is_wrapped_in_a_scrolling_box() -> None:
    html = render_html(_wide_document())
    wrapped = re.findall(r'<div class="table-wrap"><table>(.*?)</table></div>', html, flags=re.S)
    assert len(wrapped) == html.count("<table>") == 4
    assert any(len(re.findall(r"<th[ >]", t)) == WIDE for t in wrapped)
    rule = re.search(r"\.table-wrap \{([^}]*)\}", CSS)
    assert rule is not None
    assert re.search(r"overflow(-x)?: (auto|scroll)", rule.group(1)), rule.group(1)
    assert "max-width: 100%" in rule.group(1)


def test_no_console_or_page_errors(report: Opened) -> None:
    assert report.console_errors == []
    assert report.page_errors == []


def test_loads_nothing_but_the_file(report: Opened) -> None:
    assert report.url in report.requests
    outside = [u for u in report.requests if u != report.url and not u.startswith("data:")]
    assert outside == []


def test_nothing_is_wider_than_the_window(report: Opened) -> None:
    width = report.page.evaluate("document.documentElement.scrollWidth")
    inner = report.page.evaluate("window.innerWidth")
    assert inner == VIEWPORT["width"]
    assert width <= inner, report.page.evaluate(OVERFLOWING_JS)


def test_every_image_is_decoded(report: Opened) -> None:
    images = report.page.evaluate(IMAGES_JS)
    assert len(images) == len(list((report.path.parent / "figures").glob("*.png"))) > 0
    bad = [
        i for i in images if not (i["complete"] and i["naturalWidth"] > 0 and i["decoded"] is True)
    ]
    assert bad == []


def test_the_studys_figure_is_shown_inside_the_window_and_the_summary_links_to_it(
    report: Opened,
) -> None:
    page = report.page
    shown = page.evaluate(
        "(() => { const img = document.querySelector('#studies figure img');"
        " const r = img.getBoundingClientRect();"
        " return [img.naturalWidth, r.width, r.height, r.left, r.right]; })()"
    )
    natural, width, height, left, right = shown
    assert natural > 0 and width > 0 and height > 0
    assert left >= 0 and right <= VIEWPORT["width"]
    page.click("#summary a[href='#studies']")
    page.wait_for_function("location.hash === '#studies'")
    top = page.evaluate("document.querySelector('#studies').getBoundingClientRect().top")
    assert abs(top) < VIEWPORT["height"] / 2


def test_summary_is_the_first_section(report: Opened) -> None:
    titles = report.page.evaluate(
        "[...document.body.querySelectorAll('h2')].filter(h => !h.closest('nav'))"
        ".map(h => h.textContent.trim())"
    )
    assert titles, "no sections"
    assert titles[0] == "Summary", titles[:3]


def test_wide_content_stays_inside_the_window(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "index.html"
    path.write_text(render_html(_wide_document()), encoding="utf-8")
    with _open(browser, path) as opened:
        page = opened.page
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORT["width"], page.evaluate(OVERFLOWING_JS)
        boxes = page.evaluate(
            "[...document.querySelectorAll('.table-wrap')].map(w => [w.clientWidth, w.scrollWidth])"
        )
        assert len(boxes) == 4
        assert all(client <= VIEWPORT["width"] for client, _ in boxes)
        assert any(scroll > client for client, scroll in boxes), "the wide table does not scroll"
        img = page.evaluate(
            "(() => { const r = document.images[0].getBoundingClientRect();"
            " return [r.width, document.images[0].naturalWidth]; })()"
        )
        assert img[1] == 3000 and img[0] < VIEWPORT["width"]
        assert opened.console_errors == [] and opened.page_errors == []


def test_the_problems_box_sits_between_the_title_and_the_summary(
    browser: Any, tmp_path: Path
) -> None:
    document = _wide_document()
    document.problems = ((f"cells/x/record.json unreadable {UNBROKEN}",), ("<b>not bold</b>",))
    path = tmp_path / "index.html"
    path.write_text(render_html(document), encoding="utf-8")
    with _open(browser, path) as opened:
        page = opened.page
        box = page.evaluate(
            "(() => { const a = document.querySelector('aside.problems');"
            " return [a.getBoundingClientRect().top, a.innerText,"
            " document.querySelector('h1').getBoundingClientRect().bottom,"
            " document.querySelector('main section').getBoundingClientRect().top]; })()"
        )
        top, text, title_bottom, first_section = box
        assert title_bottom <= top < first_section
        assert text.startswith("Problems (2)") and "<b>not bold</b>" in text
        titles = page.evaluate(
            "[...document.body.querySelectorAll('h2')].filter(h => !h.closest('nav'))"
            ".map(h => h.textContent.trim())"
        )
        assert titles[0] == "Summary"
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORT["width"], page.evaluate(OVERFLOWING_JS)
        assert opened.console_errors == [] and opened.page_errors == []


def test_published_pruning_rows_are_shaded_linked_and_only_under_the_mlps(
    browser: Any, tmp_path: Path
) -> None:
    root = tmp_path / "results"
    write_pruning_suite(root)
    with _open(browser, render_report(root, tmp_path / "out")) as opened:
        page = opened.page
        rows = page.evaluate(
            "[...document.querySelectorAll('section[id$=\"-figures\"] tr.published')].map(tr => {"
            " const s = getComputedStyle(tr), a = tr.querySelector('a');"
            " return [tr.closest('section').id, tr.cells[0].innerText, a && a.href,"
            " a && a.innerText, s.backgroundColor, s.fontStyle]; })"
        )
        plain = page.evaluate(
            "getComputedStyle(document.querySelector('#mnist-mlp1024-figures tbody tr'))"
            ".backgroundColor"
        )
        url = "https://arxiv.org/abs/1505.05424"
        shade = "rgb(238, 246, 238)"  # --published: #eef6ee
        label = "Blundell et al. 2015, Table 2"
        assert rows == [
            ["mnist-figures", "Bayes by Backprop, MLP 2 x 1200", url, label, shade, "italic"],
            [
                "mnist-mlp1024-figures",
                "Bayes by Backprop, MLP 2 x 1200",
                url,
                label,
                shade,
                "italic",
            ],
        ]
        assert plain != shade
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORT["width"], page.evaluate(OVERFLOWING_JS)
        assert opened.console_errors == [] and opened.page_errors == []


#: The first screen the answer must fit in.
FIRST_SCREEN = {"width": 1280, "height": 800}
#: Groups whose made-up predictive is over-confident out of range, by how much (std ratio).
OVERCONFIDENT_AT = {
    **dict.fromkeys(("map", "map (tuned)", "swag (tuned)"), 0.04),
    **dict.fromkeys(("ensemble", "ensemble (tuned)"), 0.27),
    **{"mcdropout": 0.11, "mcdropout (tuned)": 0.09},
}


def _default_shaped_answer(tmp_path: Path) -> Document:
    """A report with the default suite's datasets, contestants and replicates (from
    ``benchmarks/default.toml``), made-up metrics that give every grade, and a Summary below."""
    rng = np.random.default_rng(0)
    rows = []
    for cell in load_suite("default").cells():
        if cell.sweep is not None:
            continue
        method = f"{cell.method} (tuned)" if cell.tune else cell.method
        quality = 1.0 + (sum(map(ord, method)) % 17)  # a fixed, distinct level per method
        classification = cell.dataset == "digits"
        rows.append(
            {
                "dataset": cell.dataset,
                "method": method,
                "backend": cell.backend,
                "split": cell.split,
                "seed": cell.seed,
                "status": "ok",
                "rmse": np.nan if classification else 1.0,
                "nll" if classification else "test_ll": quality + rng.normal(),
                # Every third method's distances wobble by 80%: undecided at three seeds.
                "ref_w2": np.nan
                if classification
                else quality * np.exp(rng.normal(0.0, 0.8 if quality % 3 == 0 else 0.02)),
                "ref_std_ratio_out": OVERCONFIDENT_AT.get(method, 1.0),
                "flags": "test log-likelihood below the constant predictor's"
                if (method, cell.dataset) in {("svi", "gap"), ("lowrank", "gap")}
                else None,
                "time_total": rng.uniform(0.1, 50.0),
                "time_compile": 0.0,
            }
        )
    cells = pd.DataFrame(rows)
    (tmp_path / PREDICTIONS_FILE).write_bytes(b"")
    recs = {}
    for dataset in ("digits", "diabetes", "gap", "sine"):
        references = [
            ReferenceEntry(dataset, 0, "ok", True, None, {}, {}, {}, 1.0, tmp_path)
        ] if dataset != "digits" else []  # fmt: skip
        mine = with_cost(cells[cells["dataset"] == dataset])
        recs[dataset] = recommend(dataset, mine, references)
    summary = Section("Summary", "summary", [Paragraph.of("The evidence.")])
    return Document(
        "Benchmark report: default",
        "A suite description that a reader unfolds.",
        [summary],
        problems=(("one problem",),),
        answer=answer_blocks(recs),
    )


def test_the_answer_fits_the_first_screen_of_a_default_sized_report(
    browser: Any, tmp_path: Path
) -> None:
    document = _default_shaped_answer(tmp_path)
    path = tmp_path / "index.html"
    path.write_text(render_html(document), encoding="utf-8")
    with _open(browser, path, FIRST_SCREEN) as opened:
        page = opened.page
        boxes = page.evaluate(
            "[...document.querySelectorAll('#answer li, #answer .scoreboard')].map(e => {"
            " const r = e.getBoundingClientRect();"
            " return [e.className || e.innerText.split(':')[0], r.top, r.bottom, r.right]; })"
        )
        names = [name for name, *_ in boxes]
        assert names == ["digits", "diabetes", "gap", "sine", "table-wrap scoreboard"]
        outside = [box for box in boxes if not (box[1] >= 0 and box[2] <= 800 and box[3] <= 1280)]
        assert outside == []
        grades = page.evaluate(
            "[...new Set([...document.querySelectorAll('.scoreboard td')].map(td => td.className))]"
        )
        assert {"mark-trust", "mark-as-good", "mark-undecided", "mark-worse", "mark-avoid",
            "none"} <= set(grades)  # fmt: skip
        hover = page.evaluate(
            "document.querySelector('.scoreboard td.mark-trust').getAttribute('title')"
        )
        assert re.search(
            r"on \w+: trust; (W2 to ref\.|test LL) [-\d.]+ ± [\d.]+; n = 3; [\d.]+ s$", hover
        )
        # The suite's description and the contents come after the answer, folded.
        about = page.evaluate(
            "(() => { const d = document.querySelector('details.about');"
            " return [d.open, d.getBoundingClientRect().top,"
            " document.querySelector('#answer').getBoundingClientRect().bottom]; })()"
        )
        assert about[0] is False and about[1] >= about[2]
        assert opened.console_errors == [] and opened.page_errors == []


def test_the_tiny_suites_answer_names_each_dataset(report: Opened) -> None:
    items = report.page.evaluate(
        "[...document.querySelectorAll('#answer li')].map(li => li.innerText)"
    )
    assert [item.split(":")[0] for item in items] == ["sine", "blobs"]
    assert items[0].startswith("sine: Trust nuts/numpyro (test LL 0.449; n = 1")
    report.page.click("#answer a[href='#summary-blobs']")
    report.page.wait_for_function("location.hash === '#summary-blobs'")
