"""The built documentation site in a real browser: every page is reachable from the index by
its links, every internal link and anchor resolves, no page logs a console or page error, and
nothing is fetched from outside the site.

The site is built by ``nox -s docs``, which then runs this module with ``PPL_BNN_SITE`` naming
the build; without it (``nox -s tests``) the module skips. With it, a missing browser is a
failure, not a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag, urlparse

import pytest

SITE_ENV = "PPL_BNN_SITE"
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
#: Pages Sphinx writes that nothing needs to link to.
UNLINKED = {"genindex.html", "search.html", "py-modindex.html"}

LINKS_JS = """() => Array.from(document.querySelectorAll('a[href]'), a => a.href)"""
IDS_JS = """() => Array.from(document.querySelectorAll('[id]'), e => e.id)"""
#: A shown section navigation with no link in it, and the code blocks clipped at their edge.
LAYOUT_JS = """() => {
  const nav = document.querySelector('nav.bd-docs-nav');
  const shown = nav !== null && nav.offsetParent !== null;
  return {
    empty_nav: shown && nav.querySelectorAll('a').length === 0,
    clipped: Array.from(document.querySelectorAll('pre'))
      .filter(e => e.scrollWidth > e.clientWidth + 1).length,
  };
}"""


def _site() -> Path:
    value = os.environ.get(SITE_ENV)
    if not value:
        pytest.skip(f"{SITE_ENV} is not set: nox -s docs builds the site and runs these tests")
    site = Path(value).resolve()
    assert (site / "index.html").is_file(), f"{SITE_ENV}={value} holds no index.html"
    return site


@dataclass
class Crawl:
    """What a breadth-first walk over the site's links found."""

    pages: dict[Path, list[str]] = field(default_factory=dict)  # page -> its anchors' ids
    links: list[tuple[Path, Path, str]] = field(default_factory=list)  # (from, to, fragment)
    errors: dict[Path, list[str]] = field(default_factory=dict)
    layout: dict[Path, dict[str, Any]] = field(default_factory=dict)  # LAYOUT_JS's findings
    outside: set[str] = field(default_factory=set)


def _local(url: str, site: Path) -> tuple[Path, str] | None:
    """The site file and fragment a link points at, or None for a link out of the site."""
    address, fragment = urldefrag(url)
    parsed = urlparse(address)
    if parsed.scheme != "file":
        return None
    path = Path(unquote(parsed.path))
    if path.is_dir():
        path = path / "index.html"
    return (path, fragment) if site in path.parents or path == site else None


@pytest.fixture(scope="module")
def crawl() -> Iterator[Crawl]:
    site = _site()
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} missing (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    found = Crawl()
    queue = [site / "index.html"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        current: dict[str, Any] = {}

        def record_request(request: Any) -> None:
            if not request.url.startswith(("file:", "data:", "blob:")):
                found.outside.add(request.url)

        page.on("request", record_request)
        page.on(
            "console",
            lambda msg: current["errors"].append(msg.text) if msg.type == "error" else None,
        )
        page.on("pageerror", lambda error: current["errors"].append(str(error)))
        while queue:
            path = queue.pop(0)
            if path in found.pages:
                continue
            current["errors"] = []
            page.goto(path.as_uri(), wait_until="load")
            found.pages[path] = page.evaluate(IDS_JS)
            found.layout[path] = page.evaluate(LAYOUT_JS)
            if current["errors"]:
                found.errors[path] = current["errors"]
            for href in page.evaluate(LINKS_JS):
                target = _local(href, site)
                if target is None:
                    continue
                found.links.append((path, *target))
                if target[0].suffix == ".html" and target[0].is_file():
                    queue.append(target[0])
        context.close()
        browser.close()
    yield found


def test_every_page_is_reachable_from_the_index(crawl: Crawl) -> None:
    site = _site()
    built = {p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_")}
    unreached = sorted(
        str(p.relative_to(site)) for p in built - set(crawl.pages) if p.name not in UNLINKED
    )
    assert not unreached, f"pages no link leads to: {unreached}"
    assert len(crawl.pages) >= 20, sorted(str(p.relative_to(site)) for p in crawl.pages)


def test_no_page_logs_a_console_or_page_error(crawl: Crawl) -> None:
    assert not crawl.errors, {str(p): e for p, e in crawl.errors.items()}


def test_every_internal_link_and_anchor_resolves(crawl: Crawl) -> None:
    broken = [
        f"{source.name} -> {target}" for source, target, _ in crawl.links if not target.exists()
    ]
    assert not broken, broken
    missing = [
        f"{source.name} -> {target.name}#{fragment}"
        for source, target, fragment in crawl.links
        if fragment and target in crawl.pages and fragment not in crawl.pages[target]
    ]
    assert not missing, missing


def test_no_page_shows_an_empty_navigation_or_clips_its_code(crawl: Crawl) -> None:
    """At 1280 px: a page's section navigation, where shown, lists pages, and long lines of
    code and of output wrap instead of running past their box."""
    empty = sorted(p.name for p, found in crawl.layout.items() if found["empty_nav"])
    assert not empty, f"pages with an empty section navigation: {empty}"
    clipped = {p.name: found["clipped"] for p, found in crawl.layout.items() if found["clipped"]}
    assert not clipped, f"code blocks clipped (page: count): {clipped}"


def test_nothing_is_fetched_from_outside_the_site(crawl: Crawl) -> None:
    assert not crawl.outside, sorted(crawl.outside)


def test_the_tutorials_ran_and_the_benchmark_tables_came_from_the_records(crawl: Crawl) -> None:
    """Each tutorial page shows executed output, and the default suite's page shows the
    committed records' run."""
    site = _site()
    for name in ("regression", "classification", "writing-a-suite"):
        html = (site / "tutorials" / f"{name}.html").read_text()
        assert "cell_output" in html, f"tutorials/{name}.html has no executed output"
        source = (ROOT / "docs" / "tutorials" / f"{name}.md").read_text()
        if "plt." in source:  # a page that draws holds its figure
            assert "<img" in html, f"tutorials/{name}.html draws a figure but holds no image"
    default = (site / "benchmarks" / "default.html").read_text()
    assert "benchmarks/results/default/" in default and "Trust " in default
