"""docs/runtime-schedules.md's Python walkthrough runs as written on a fresh database (its
shell walkthrough is a runnable block: tests/integration/test_docs_runnable.py), prints on
`make run`'s demo data what the page says it prints, and says which variable it needs."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import psycopg

from devstack.demo import load_demo_data, seed_weekly_reports
from tests.helpers import ROOT, run_python_block, run_python_walkthrough

PAGE = ROOT / "docs" / "runtime-schedules.md"


def test_the_python_walkthrough_runs_as_written(database_url):
    lines = run_python_walkthrough(PAGE, database_url)
    assert lines[0].startswith("rt-1 1 ")
    assert "['month-end'] {} []" in "\n".join(lines)
    assert lines[-1] == "a future fire time"
    with psycopg.connect(database_url) as conn:
        actions = [
            r[0] for r in conn.execute("SELECT action FROM runtime_schedule_changes ORDER BY id")
        ]
    assert actions == ["create", "update", "pause", "resume", "trigger", "create"]


def said_output() -> list[str]:
    """The lines the page says the walkthrough prints (the text block after it)."""
    text = PAGE.read_text()
    after = text[text.index("```python") :]
    block = re.search(r"^```text\n(.*?)^```$", after, re.MULTILINE | re.DOTALL)
    assert block, "the page says not what its walkthrough prints"
    return block[1].splitlines()


async def test_on_make_runs_demo_data_it_prints_what_the_page_says(database_url):
    """The demo data `make run` loads (1,000 weekly-report schedules) before the example:
    its schedule is rt-1001, as the page says. The next fire time on the first line and the
    backfill's count depend on the day."""
    with psycopg.connect(database_url) as conn:
        load_demo_data(conn, datetime.now(UTC))
    assert await seed_weekly_reports(database_url) == 1000
    printed = [line.rstrip() for line in run_python_walkthrough(PAGE, database_url)]
    said = said_output()
    assert len(printed) == len(said), (printed, said)
    assert printed[0].split()[:2] == said[0].split()[:2] == ["rt-1001", "1"]
    backfill = re.compile(r"\d+ fire time\(s\) a backfill would run")
    assert backfill.fullmatch(printed[4]) and backfill.fullmatch(said[4])
    assert printed[1:4] + printed[5:] == said[1:4] + said[5:]


def test_without_database_url_it_says_it_needs_it():
    done = run_python_block(PAGE, {})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "DATABASE_URL is not set: the URL of the database to write to"
    ]
    assert "DATABASE_URL" in PAGE.read_text().split("```python")[0].split("## From Python")[1]
