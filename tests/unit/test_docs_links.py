"""The README stays a front page, and the documentation's links lead somewhere.

- README.md has at most 220 lines;
- every page in docs/ is linked from README.md;
- every relative link in README.md and docs/*.md names a file that exists and, with an
  anchor, a heading of that file (anchors as GitHub makes them from headings).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 220

_FENCE = re.compile(r"^ *(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) +(.+?) *#* *$")
_LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?: +\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"(`+).+?\1")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fence = [], None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # code spans keep their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of `path`, numbered as GitHub numbers repeated headings."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path.read_text()):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    targets = []
    for line in prose_lines(path.read_text()):
        targets += _LINK.findall(_CODE_SPAN.sub("", line))
    return targets


def dead_links(path: Path) -> list[str]:
    dead = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            dead.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            dead.append(f"{target}: no heading with the anchor #{anchor} in {linked.name}")
    return dead


def test_the_readme_is_a_front_page():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines, at most {MAX_README_LINES}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for target in links(README)
        if target.partition("#")[0]
    }
    assert PAGES, "docs/ has no pages"
    unlinked = [page.name for page in PAGES if page.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_lead_to_a_file_and_heading(path: Path):
    assert not dead_links(path)


# --- the checker itself, on pages written for it -------------------------------------------


def test_slugs_follow_githubs_rules():
    assert slug("Missed runs (catch-up)") == "missed-runs-catch-up"
    assert slug("Trigger, backfill, inspect with the `temporal` CLI") == (
        "trigger-backfill-inspect-with-the-temporal-cli"
    )
    assert slug("2a. Temporal, self-hosted with the official Helm chart") == (
        "2a-temporal-self-hosted-with-the-official-helm-chart"
    )
    assert slug("What Temporal does, and what is compiled instead") == (
        "what-temporal-does-and-what-is-compiled-instead"
    )
    assert slug("snake_case stays") == "snake_case-stays"


def test_dead_links_and_anchors_are_found(tmp_path: Path):
    (tmp_path / "other.md").write_text("# Other\n\n## Same\n\n## Same\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## A heading, with `code`\n\n"
        "[ok](other.md) [ok](other.md#same-1) [ok](#a-heading-with-code) [web](https://x.y/z)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) [bad local](#nope)\n"
        "`[in code](missing-too.md)`\n"
        "```\n[in a block](missing-three.md)\n# not a heading\n```\n"
    )
    assert dead_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading with the anchor #nowhere in other.md",
        "#nope: no heading with the anchor #nope in page.md",
    ]
    assert "not-a-heading" not in anchors(page)
