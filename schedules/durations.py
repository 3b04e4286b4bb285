"""Durations as people write them in the catalog: "90s", "15m", "6h", "1d", "1h30m"."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: Any) -> Any:
    """Turn "1h30m"-style text into a timedelta; leave anything else to pydantic."""
    if not isinstance(value, str) or value.upper().startswith("P"):
        return value
    text = value.strip().replace(" ", "")
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"is not a duration like '90s', '15m', '6h', '1d': {value!r}")
    return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))


def format_duration(value: timedelta) -> str:
    """The short form of `value`, e.g. 5400 s -> "1h30m"."""
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
