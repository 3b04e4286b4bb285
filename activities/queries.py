"""Named SQL queries kept in `activities/sql/*.sql`.

A file holds several queries, each introduced by a `-- name: query_name` line.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def queries(family: str) -> dict[str, str]:
    """Return the queries of `activities/sql/<family>.sql` by name."""
    text = resources.files("activities.sql").joinpath(f"{family}.sql").read_text()
    parts = _HEADER.split(text)
    named = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in named:
            raise ValueError(f"query {name!r} is defined twice in {family}.sql")
        named[name] = body.strip()
    return named
