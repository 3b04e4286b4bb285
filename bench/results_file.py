"""Where the benchmarks write their sections: one file a day, bench/results/<UTC date>.md.

Each bench appends the full section of its run (machine, command, commit, figures) to the
day's file; bench/RESULTS.md is the short page of current figures, edited by hand, that
links to those sections.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def today() -> Path:
    """bench/results/<today's UTC date>.md, the default target of every bench's output."""
    return RESULTS / f"{datetime.now(UTC):%Y-%m-%d}.md"


def append(path: Path, section: str) -> None:
    """Append `section` to `path`, starting a new file with its title line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(f"# Benchmark results, {path.stem}\n")
    with path.open("a") as out:
        out.write(section)
