"""The oracle of `window` mappings on ordinary and DST nights: a nightly 02:00 job in New
York or London waits for an hourly UTC upstream's slots in `(P, S]`, P its previous fire
time. The instants are worked out by hand from the zones' rules, never computed by the
code under test; the unit and the integration tests of dependencies both judge by them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

H = timedelta(hours=1)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def hours(first: datetime, last: datetime) -> list[datetime]:
    """Every whole UTC hour from `first` to `last`, both included."""
    out, t = [], first
    while t <= last:
        out.append(t)
        t += H
    return out


# (zone, our slot S in UTC, our previous fire time P in UTC): the window is (P, S].
WINDOWS = {
    # 02:00 New York: EST is UTC-5, EDT UTC-4.
    "new york, an ordinary night": ("America/New_York", utc(2026, 11, 20, 7), utc(2026, 11, 19, 7)),
    # 2026-03-08 02:00 does not exist: the night runs at 03:00 EDT = 07:00Z, 24h after.
    "new york, spring forward": ("America/New_York", utc(2026, 3, 8, 7), utc(2026, 3, 7, 7)),
    "new york, the night after": ("America/New_York", utc(2026, 3, 9, 6), utc(2026, 3, 8, 7)),
    # 2026-11-01: 02:00 EST = 07:00Z, the night before 02:00 EDT = 06:00Z.
    "new york, fall back": ("America/New_York", utc(2026, 11, 1, 7), utc(2026, 10, 31, 6)),
    # 02:00 London: 2026-03-29 02:00 BST = 01:00Z, the night before 02:00 GMT = 02:00Z.
    "london, spring forward": ("Europe/London", utc(2026, 3, 29, 1), utc(2026, 3, 28, 2)),
    # 2026-10-25 02:00 GMT = 02:00Z, the night before 02:00 BST = 01:00Z.
    "london, fall back": ("Europe/London", utc(2026, 10, 25, 2), utc(2026, 10, 24, 1)),
}
COUNTS = {
    "new york, an ordinary night": 24,
    "new york, spring forward": 24,
    "new york, the night after": 23,
    "new york, fall back": 25,
    "london, spring forward": 23,
    "london, fall back": 25,
}
