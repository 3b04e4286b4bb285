"""Durations as people write them in the catalog: "90s", "15m", "6h", "1d", "1h30m"."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# The longest duration the catalog takes: ten years is more than any timeout or window
# needs, and far inside what timedelta and Temporal's protobuf durations can hold.
LONGEST = timedelta(days=3650)


def parse_duration(value: Any) -> Any:
    """Turn "1h30m"-style text into a timedelta; leave ISO 8601 text and timedeltas to
    pydantic. A bare number (or `true`) is refused: its unit would be a guess."""
    if isinstance(value, bool | int | float):
        raise ValueError(
            f"must be a duration in quotes like '90s', '15m', '6h', '1d', got {value!r}"
        )
    if not isinstance(value, str) or value.upper().startswith("P"):
        return value
    text = value.strip().replace(" ", "")
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"is not a duration like '90s', '15m', '6h', '1d': {value!r}")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds > LONGEST.total_seconds():
        raise ValueError(
            f"is longer than {format_duration(LONGEST)}, the longest the catalog takes: {value!r}"
        )
    return timedelta(seconds=seconds)


def _bounded(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError(f"must not be negative, got {value}")
    if value > LONGEST:
        raise ValueError(
            f"is longer than {format_duration(LONGEST)}, the longest the catalog takes"
        )
    return value


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


Duration = Annotated[timedelta, BeforeValidator(parse_duration), AfterValidator(_bounded)]
