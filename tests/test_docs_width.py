"""The documentation fits the page: code blocks wrap at the page width on the site (the stylesheet mkdocs.yml
loads), no page gains code lines wider than 88 characters (the width a page shows without wrapping), and the home
page's figure is one panel that a page's width shows readably, with every panel linked."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
WIDTH = 88  # characters of code a page shows on one line
# Code lines wider than WIDTH that pages still hold (the site wraps them); none may be added.
WIDE_LINES = {
    "README.md": 1,
}


def _wide_code_lines(page: Path) -> list[int]:
    """Line numbers of the code-block lines of `page` wider than WIDTH."""
    wide, inside = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside and len(line) > WIDTH:
            wide.append(number)
    return wide


def test_the_site_wraps_code_at_the_page_width() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python/name:", ""))
    sheets = [DOCS / sheet for sheet in config.get("extra_css", [])]
    assert sheets and all(sheet.is_file() for sheet in sheets)
    rules = " ".join(sheet.read_text(encoding="utf-8") for sheet in sheets)
    wrap = re.search(r"\.md-typeset pre > code\s*\{([^}]*)\}", rules)
    assert wrap is not None and "white-space: pre-wrap" in wrap.group(1)


def test_no_page_gains_code_lines_wider_than_the_page() -> None:
    pages = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    found = {str(page.relative_to(REPO)): len(_wide_code_lines(page)) for page in pages}
    grown = {page: count for page, count in found.items() if count > WIDE_LINES.get(page, 0)}
    assert not grown, f"code lines wider than {WIDTH} characters (wrap them): {grown}"


def _png_width(path: Path) -> int:
    """The width in pixels of a PNG file (its IHDR chunk)."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int(struct.unpack(">I", header[16:20])[0])


def test_the_home_page_figure_is_readable_at_page_width() -> None:
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", home)
    assert figures, "the home page shows a figure"
    for figure in figures:
        assert _png_width(DOCS / figure) <= 900, figure  # one panel, not a row of six squeezed to the page
    assert "](pipelines.png)" in home  # every panel, one click away
