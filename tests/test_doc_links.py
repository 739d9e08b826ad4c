"""Every relative link in README.md, docs/*.md and benchmarks/results/*.md reaches a file
that exists, and every ``#anchor`` a heading of the page it names (as GitHub renders it:
lower case, punctuation dropped, spaces to hyphens). Pages move sections between them;
a link left pointing at the old place is caught here, not by a reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "benchmarks" / "results").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced blocks, numbered from 1."""
    out, fenced = [], False
    for n, line in enumerate(path.read_text("utf-8").split("\n"), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append((n, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for _, line in _prose(path) if re.match(r"^#{1,6} ", line)}


def test_slug_is_githubs():
    assert slug(" 7. Learning from the teacher (`learn=True`)") == (
        "7-learning-from-the-teacher-learntrue"
    )
    assert slug("Busy is not quiet (2026-12-02, evening)") == (
        "busy-is-not-quiet-2026-12-02-evening"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path):
    broken = []
    for n, line in _prose(page):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}:{n}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}:{n}: {target} (no heading #{anchor} there)")
    assert not broken, "\n".join(broken)
