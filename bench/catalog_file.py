"""A job catalog written as a file, for the benches that run `schedules` on one of their own
(`bench/scale.py`, `bench/fleet_audit.py`): tables of the few value types a catalog entry
takes, as TOML."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def utc(instant: datetime) -> str:
    """An instant as the catalog's docs write it: `2026-12-02T16:48:00Z`."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def toml_value(value: Any) -> str:
    """A catalog table's value as TOML: a bool, a number, an instant, text, or a table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, datetime):
        return json.dumps(utc(value))
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string for this ASCII text
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def write_catalog(path: Path, tables: dict[str, dict[str, Any]]) -> None:
    """Write `tables` (job id -> its table) to `path` as a catalog file."""
    lines = []
    for job_id, table in tables.items():
        lines.append(f"[{job_id}]")
        lines.extend(f"{key} = {toml_value(value)}" for key, value in table.items())
        lines.append("")
    path.write_text("\n".join(lines))
