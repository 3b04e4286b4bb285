"""bench/RESULTS.md is a short page of current figures; the history it held lives, verbatim,
in bench/results/<run date>.md, and the benches append there (issue 43, item 8).

- the dated files, read in date order, begin with the 67 sections bench/RESULTS.md held when
  the benches last appended to it (`git show d7df1df:bench/RESULTS.md`), word for word: a
  run appended since comes after them;
- the page stays short and its links lead to a file and a heading;
- `bench/results_file.py` names the day's file and starts a new file with its title line.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from bench.results_file import RESULTS, append, today
from tests.helpers import ROOT
from tests.unit.test_docs_links import dead_links

PAGE = ROOT / "bench" / "RESULTS.md"
MAX_PAGE_LINES = 230
HISTORY_DAYS = ["2026-11-29", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-07"]
# The `## ` sections of bench/RESULTS.md at d7df1df, joined by one blank line.
HISTORY_SECTIONS = 67
HISTORY_SHA256 = "eb83ffa40e22aed64f03cd536f4db62d37f04cd636be40ee69fe38a980c804ff"


def sections(text: str) -> list[str]:
    """The `## ` sections of a results file, each from its heading to the next one, without
    the blank lines that separate them."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            found.append([])
        if found:
            found[-1].append(line)
    return ["\n".join(section).rstrip("\n") for section in found]


def test_the_dated_files_hold_the_old_history_word_for_word():
    history = [s for day in HISTORY_DAYS for s in sections((RESULTS / f"{day}.md").read_text())]
    assert len(history) >= HISTORY_SECTIONS
    held = "\n\n".join(history[:HISTORY_SECTIONS])
    assert hashlib.sha256(held.encode()).hexdigest() == HISTORY_SHA256, (
        "bench/results/ no longer holds bench/RESULTS.md's history as it was: compare with "
        "`git show d7df1df:bench/RESULTS.md`"
    )


def test_each_day_of_the_history_opens_with_its_title():
    for day in HISTORY_DAYS:
        assert (RESULTS / f"{day}.md").read_text().startswith(f"# Benchmark results, {day}\n\n")


def test_the_page_of_current_figures_is_short_and_its_links_lead_somewhere():
    lines = len(PAGE.read_text().splitlines())
    assert lines < MAX_PAGE_LINES, f"bench/RESULTS.md has {lines} lines"
    assert not dead_links(PAGE)
    linked = set(re.findall(r"\]\(results/([\d-]+)\.md", PAGE.read_text()))
    assert linked >= set(HISTORY_DAYS), f"days the page does not link: {set(HISTORY_DAYS) - linked}"


def test_the_days_file_is_named_by_its_utc_date_and_starts_with_its_title(tmp_path: Path):
    assert today().parent == RESULTS
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}\.md", today().name)
    day = tmp_path / "results" / "2026-12-08.md"
    append(day, "\n## A run\n\nfigures\n")
    append(day, "\n## Another run\n")
    assert day.read_text() == (
        "# Benchmark results, 2026-12-08\n\n## A run\n\nfigures\n\n## Another run\n"
    )
    assert sections(day.read_text()) == ["## A run\n\nfigures", "## Another run"]
