"""The longest time between two fire times of a job: what "overdue" means for its alerts.

A daily job is overdue 25 hours after its last run on the night clocks fall back, an
hourly one after an hour, a monthly one after 31 days. Computed without walking every fire
time of the year (a job firing every minute has half a million): the gaps between matching
local days and between a day's own times give the longest gap in local time, and only the
few hours around each of the year's offset changes are walked fire by fire, since that is
the only place real (elapsed) time differs from local time.
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import lru_cache
from itertools import pairwise

from timing.cron import Cron
from timing.firetimes import cron_fires
from timing.zones import changes_in_year

# Wider than any offset change (Lord Howe's is 30 minutes, the largest in use today 1 hour;
# history has 2): around a change, fire times are walked this far past the local gap.
_SLACK = timedelta(hours=3)
_DAY = timedelta(days=1)


@lru_cache(maxsize=4096)
def longest_gap(expr: Cron, timezone: str, year: int) -> timedelta | None:
    """The longest time between a fire time in `year` (local dates) and the next one,
    offset changes included; None if the job fires fewer than twice from `year` on."""
    seconds = [h * 3600 + m * 60 + s for h, m, s in expr.times]
    if not seconds:
        return None
    days: list[date] = []  # the matching days of `year`, and the first one after it
    day = date(year, 1, 1)
    while day < date(year + 3, 1, 1):
        if expr.matches_day(day):
            days.append(day)
            if day.year > year:
                break
        day += _DAY
    if not days or days[0].year > year or (len(days) < 2 and len(seconds) < 2):
        return None
    gaps = [timedelta(seconds=b - a) for a, b in pairwise(seconds)]
    gaps += [(b - a) - timedelta(seconds=seconds[-1] - seconds[0]) for a, b in pairwise(days)]
    local = max(gaps)
    for change in changes_in_year(timezone, year):
        start, end = change.at - local - _SLACK, change.at + local + _SLACK
        around = cron_fires(expr, timezone, start, end)
        local = max([local, *(b - a for a, b in pairwise(around))])
    return local
