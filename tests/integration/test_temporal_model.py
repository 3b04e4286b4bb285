"""The model of Temporal's calendar matching (`timing.temporal_model`) against the real server.

The compiler trusts calendars in a job's own zone only where the model says they fire the
intended times, so the model must be what the server does. For every distinct way a zone
changes its offsets in 2027-2031 (one zone of each `same_offsets` group: 28 ways among 101
zones), paused schedules carry calendars at the times where the server was seen to go wrong (midnight, the gap and the repeated hour, weekdays where midnight is
skipped, hourly and half-hourly, a stepped range over 01:00-03:00, month days); each
calendar fires at its own second, so none can hide another. The server's own listing of the
local days around every change is compared with the model's, time for time.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleCalendarSpec,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
)

from tests.integration.zones_under_test import (
    bounded,
    changing_zones,
    same_offsets,
    server_times,
    windows,
)
from timing.temporal_model import matching_times


def calendar(second: int, hour, minute=(0,), day_of_week=None, day_of_month=None):
    def ranges(values):
        return tuple(
            ScheduleRange(*v) if isinstance(v, tuple) else ScheduleRange(v) for v in values
        )

    fields = {"second": (ScheduleRange(second),), "minute": ranges(minute), "hour": ranges(hour)}
    if day_of_week is not None:
        fields["day_of_week"] = ranges(day_of_week)
    if day_of_month is not None:
        fields["day_of_month"] = ranges(day_of_month)
    return ScheduleCalendarSpec(**fields)


# Two schedules a zone: the model asks every calendar of a spec for each time it lists, so
# the hourly ones are kept apart from the others.
SPARSE = [
    calendar(1, [0]),  # midnight
    calendar(2, [1], [30]),  # in the repeated hour of most zones
    calendar(3, [2], [15]),  # in the gap of most zones (and Lord Howe's half-hour one)
    calendar(4, [2], day_of_week=[0]),  # Sundays 02:00
    calendar(5, [2], day_of_week=[6]),  # Saturdays 02:00
    calendar(6, [23], [45], day_of_week=[(1, 5)]),  # weeknights 23:45
    calendar(9, [(1, 3)], [(0, 59, 20)]),  # 01:00-03:40 every 20 minutes
    calendar(10, [12], day_of_month=[1, 15]),  # the 1st and the 15th at noon
]
HOURLY = [
    calendar(7, [(0, 23)]),  # every hour
    calendar(8, [(0, 23)], [(0, 59, 30)]),  # every half hour
]


async def test_the_model_lists_what_the_server_lists_around_every_change(client, task_queue):
    cases = {
        (zone, kind): ScheduleSpec(calendars=calendars, time_zone_name=zone)
        for zone in [group[0] for group in same_offsets(changing_zones()).values()]
        for kind, calendars in (("sparse", SPARSE), ("hourly", HOURLY))
    }
    ids = {case: f"model-{uuid.uuid4().hex[:10]}" for case in cases}

    def create(case):
        return lambda: client.create_schedule(
            ids[case],
            Schedule(
                action=ScheduleActionStartWorkflow("NeverRuns", id="never", task_queue=task_queue),
                spec=cases[case],
                state=ScheduleState(paused=True, note="model test: never runs"),
            ),
        )

    def compare(case, start: datetime, end: datetime):
        async def call() -> str | None:
            served = await server_times(client, ids[case], start, end)
            tick = timedelta(seconds=1)
            modelled = matching_times(cases[case], start - tick, end - tick)
            if served == modelled:
                return None
            only_server = sorted(set(served) - set(modelled))[:4]
            only_model = sorted(set(modelled) - set(served))[:4]
            return f"{case} {start:%Y-%m-%d}: server only {only_server}, model only {only_model}"

        return call

    handles = await bounded(create(case) for case in cases)
    try:
        checks = [compare(case, a, b) for case in cases for a, b in windows(case[0])]
        problems = [p for p in await bounded(checks, limit=8) if p]
    finally:
        await bounded(lambda h=h: h.delete() for h in handles)
    assert len(checks) >= 2 * 10 * 25  # two schedules, about ten windows, 28 ways
    assert not problems, "\n".join(problems[:20])
