"""The shell blocks of README.md and docs/*.md, each with the comment that says who runs it.

Every ```sh block follows a comment line saying so (tests/integration/test_docs_runnable.py
holds them to it):

- `<!-- runnable: ... -->`: test_docs_runnable.py runs it against the session's servers;
- `<!-- runnable on make run: ... -->`: test_localstack.py runs it on `make run`'s stack;
- `<!-- run by <test file> ... -->`: that test follows it (the README's tour, `make run`);
- `<!-- not run by the tests: <why> -->`: it needs what the tests do not have (a cluster).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SH = re.compile(
    r"^(?:[ \t]*<!--(?P<note>[^\n]*)-->\n)?(?P<indent>[ \t]*)```sh\n(?P<body>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
KINDS = ("runnable:", "runnable on make run:", "run by ", "not run by the tests:")


@dataclass(frozen=True)
class Block:
    where: str  # `file.md:N`, N the line of its first command
    note: str  # the comment before it, stripped ("" without one)
    body: str


def shell_blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in _SH.finditer(text):
            line = text[: match.start("body")].count("\n") + 1
            indent = match["indent"]
            body = "".join(
                row.removeprefix(indent) for row in match["body"].splitlines(keepends=True)
            )
            found.append(Block(f"{path.name}:{line}", (match["note"] or "").strip(), body))
    return found


def marked(kind: str) -> list[Block]:
    """The blocks whose comment starts with `kind` (one of `KINDS`)."""
    return [block for block in shell_blocks() if block.note.startswith(kind)]
