"""Does the server fire what the catalog intends? The check behind `python -m schedules verify`
and behind every `sync` that writes a schedule.

What fires is what the Temporal server computes from the schedule's spec, with its own time
zone database, so the truth is the server's own `ListScheduleMatchingTimes`, compared here
with the job's intended fire times (`JobSpec.timing`, this project's tzdata) over the next
`days` days (default a year and a month, so every yearly offset change is in it):

- A job with at most `FULL_CHECK` fire times in the range is compared time by time.
- A job that fires more often (every minute, an interval of seconds) is compared on the
  days where a calendar can go wrong: the first day of the range, each local day an offset
  change of its zone touches with a day either side, and the first day of each month, where
  a server whose database keeps another offset for weeks shows. Between offset changes a
  calendar matches the same wall-clock times every day.
- Jitter: each server time must fall within `[intended, intended + jitter)`, one for one.

A divergence names the job, the local date, the intended times and the server's. The
verdict says why when it can tell: the schedule differs from what sync writes (edited behind
sync's back: `sync --full` puts it back), or it is exactly what sync writes and its calendars
are in the job's zone (the server's time zone database disagrees with tzdata
`TZDATA_VERSION`). After writing, `sync` recompiles such a job to UTC calendars (which carry
this project's offsets), writes it again and checks again (`verify_written`); later syncs
keep it in UTC (`keep_forced_utc`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Literal

from temporalio.client import Client, ScheduleDescription, ScheduleSpec

from schedules.catalog.compile import MANAGED_MEMO_KEY, MANAGED_MEMO_VALUE, schedule_digest
from schedules.catalog.model import JobSpec
from schedules.catalog.times import adjustments, closure_windows
from schedules.progress import QUIET, Progress
from schedules.server.found import schedule_or_none
from schedules.server.times import server_times
from timing import TICK, TZDATA_VERSION, Timing, zone
from timing.calendars import (
    UTC_NAMES,
    change_windows,
    forced_utc,
    local_midnight,
    spec_outdated,
)
from timing.temporal_model import matching_times

DEFAULT_DAYS = 365 + 31
"""A year and a month: every yearly offset change is in the range, wherever it starts."""
FULL_CHECK = 10_000
"""Fire times in the range up to which every one is compared."""
CONCURRENCY = 16
_ONE_DAY = timedelta(days=1)

Status = Literal["ok", "diverges", "unknown"]


@dataclass(frozen=True)
class Divergence:
    """One local date on which the server fires other times than the catalog intends."""

    job_id: str
    day: date
    timezone: str
    intended: tuple[datetime, ...]  # every intended time of the day (UTC)
    server: tuple[datetime, ...]  # every time the server fires that day (UTC)
    missing: tuple[datetime, ...]  # intended, not fired
    extra: tuple[datetime, ...]  # fired, not intended


@dataclass
class Verdict:
    """What verifying one job found."""

    job_id: str
    status: Status
    checked: int = 0  # intended fire times compared
    total: int | None = None  # fire times in the range, when every one was compared
    days: int = 0  # with windows: the local days compared
    divergences: list[Divergence] = field(default_factory=list)
    why: str = ""  # for `diverges`: the likely cause and its fix; for `unknown`: the reason
    form: str = ""  # the server's spec: "calendars in <zone>" ...
    # A calendar job: its rule, and what the calendar does in the range (the intended,
    # adjusted times are what was compared): "moved from Fri 2026-12-25 ... to Mon ...".
    calendar: str = ""
    calendar_notes: list[str] = field(default_factory=list)


# --- the server's answer --------------------------------------------------------------------


# --- what to compare -------------------------------------------------------------------------


def windows(timing: Timing, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """The `[a, b)` ranges compared: the whole range, or for a job with more than
    `FULL_CHECK` fire times in it, the days where a calendar can go wrong."""
    if len(timing.fire_times(start, end, limit=FULL_CHECK + 1)) <= FULL_CHECK:
        return [(start, end)]
    tz = timing.timezone
    first, last = start.astimezone(zone(tz)).date(), end.astimezone(zone(tz)).date()
    days = [(first, first)]
    days += change_windows(tz, first, last)
    days += [(max(a, first), min(b, last)) for a, b in closure_windows(timing, first, last)]
    month = date(first.year, first.month, 1)
    while month <= last:
        days.append((month, month))
        month = (month + timedelta(days=32)).replace(day=1)
    merged: list[tuple[date, date]] = []
    for a, b in sorted(days):
        if merged and a <= merged[-1][1] + _ONE_DAY:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return [
        (max(local_midnight(a, tz), start), min(local_midnight(b + _ONE_DAY, tz), end))
        for a, b in merged
    ]


def unmatched(
    timing: Timing,
    intended: Sequence[datetime],
    served: Sequence[datetime],
    start: datetime,
    end: datetime,
) -> tuple[list[datetime], list[datetime]]:
    """The intended times in `[start, end)` the server does not fire, and the server's
    times in `[start, end)` no intended time accounts for. With jitter, each served time
    must lie in `[intended, intended + jitter)`, one for one, in order; give both lists a
    jitter's width beyond the range so its edges match too."""
    jitter = timing.jitter
    missing: list[datetime] = []
    matched: set[datetime] = set()
    j = 0
    for i, nominal in enumerate(intended):
        following = intended[i + 1] if i + 1 < len(intended) else None
        while j < len(served) and served[j] < nominal:
            j += 1
        if j < len(served) and (
            served[j] == nominal
            if not jitter
            else served[j] < nominal + jitter and (following is None or served[j] < following)
        ):
            matched.add(served[j])
            j += 1
        elif start <= nominal < end:
            missing.append(nominal)
    extra = [t for t in served if start <= t < end and t not in matched]
    return missing, extra


def by_day(
    job_id: str,
    timing: Timing,
    missing: Sequence[datetime],
    extra: Sequence[datetime],
    intended: Sequence[datetime],
    served: Sequence[datetime],
) -> list[Divergence]:
    """One divergence per local date with a missing or extra time."""
    tz = zone(timing.timezone)

    def on(day: date, times: Iterable[datetime]) -> tuple[datetime, ...]:
        return tuple(t for t in times if t.astimezone(tz).date() == day)

    days = sorted({t.astimezone(tz).date() for t in (*missing, *extra)})
    return [
        Divergence(
            job_id,
            day,
            timing.timezone,
            on(day, intended),
            on(day, served),
            on(day, missing),
            on(day, extra),
        )
        for day in days
    ]


# --- one job -----------------------------------------------------------------------------


def form_of(spec: ScheduleSpec) -> str:
    """`calendars in America/New_York`, `intervals`, `calendars in UTC until 2036-12-31`."""
    if spec.intervals and not spec.calendars:
        return "intervals"
    comment = spec.calendars[0].comment if spec.calendars else ""
    until = (
        f" until {comment.rsplit('until ', 1)[1][:10]}" if comment and "until " in comment else ""
    )
    forced = ", the server's tz database disagreed" if forced_utc(spec) else ""
    return f"calendars in {spec.time_zone_name or 'UTC'}{until}{forced}"


async def verify_job(
    client: Client,
    job: JobSpec,
    now: datetime,
    days: int = DEFAULT_DAYS,
    description: ScheduleDescription | None = None,
) -> Verdict:
    """Compare the server's fire times of `job` with its intended ones from `now` on."""
    if description is None:
        description = await schedule_or_none(client, job.id)
    if description is None:
        return Verdict(job.id, "unknown", why="no schedule on the server: run `sync`")
    if await description.memo_value(MANAGED_MEMO_KEY, default=None) != MANAGED_MEMO_VALUE:
        return Verdict(job.id, "unknown", why="its schedule is not managed by this project")
    timing, start, end = job.timing, now, now + timedelta(days=days)
    ranges = windows(timing, start, end)
    verdict = Verdict(job.id, "ok", form=form_of(description.schedule.spec))
    if timing.calendar is not None:
        rule = timing.calendar
        verdict.calendar = f"{rule.label} ({rule.calendar.version})"
        verdict.calendar_notes = adjustments(timing, start, end)
    jitter = timing.jitter
    missing: list[datetime] = []
    extra: list[datetime] = []
    intended: list[datetime] = []
    served: list[datetime] = []
    for a, b in ranges:
        wanted = timing.fire_times(a - jitter, b + jitter)
        got = await server_times(client, job.id, a - jitter, b + 2 * jitter)
        absent, surplus = unmatched(timing, wanted, got, a, b)
        missing += absent
        extra += surplus
        intended += [t for t in wanted if a <= t < b]
        served += [t for t in got if a <= t < b]
        verdict.checked += sum(1 for t in wanted if a <= t < b)
    if ranges == [(start, end)]:
        verdict.total = verdict.checked
    else:
        verdict.days = sum(round((b - a) / _ONE_DAY) for a, b in ranges)
    verdict.divergences = by_day(job.id, timing, missing, extra, intended, served)
    if verdict.divergences:
        verdict.status = "diverges"
        verdict.why = diagnose(job, description.schedule.spec, now, verdict.divergences)
    return verdict


def expected_spec(job: JobSpec, stored: ScheduleSpec, now: datetime) -> ScheduleSpec:
    """What sync writes for `job` now, given the spec the server has (a spec sync forced
    to UTC stays so)."""
    return job.timing.spec(now, utc=forced_utc(stored))


def diagnose(
    job: JobSpec, stored: ScheduleSpec, now: datetime, divergences: Sequence[Divergence]
) -> str:
    """The likely cause of divergences, and what fixes it."""
    expected = expected_spec(job, stored, now)
    if spec_outdated(stored, expected) or (stored.start_at, stored.end_at) != (
        expected.start_at,
        expected.end_at,
    ):
        return (
            "the schedule's spec is not what sync writes for this catalog entry (edited "
            "behind sync's back, or the catalog changed since the last sync): "
            "`python -m schedules sync --full` puts it back"
        )
    name = stored.time_zone_name or "UTC"
    if stored.calendars and name != "UTC":
        start = min(min(d.intended + d.server, default=now) for d in divergences)
        end = max(max(d.intended + d.server, default=now) for d in divergences)
        modelled = matching_times(stored, start - timedelta(seconds=1), end)
        if modelled == job.timing.fire_times(start, end + TICK):
            return (
                f"the spec is what sync writes, in calendars in {name}, and with tzdata "
                f"{TZDATA_VERSION} they fire the intended times: the server's own time zone "
                f"database gives {name} other UTC offsets on these dates. `sync` recompiles "
                "such a job to UTC calendars (they carry this project's offsets); or give "
                "the server the same database"
            )
    return (
        "the spec is what sync writes, yet the server fires other times than this "
        f"project's model of its calendar matching predicts ({form_of(stored)}): "
        "another server version? Please report it"
    )


async def verify_jobs(
    client: Client,
    jobs: Iterable[JobSpec],
    now: datetime,
    days: int = DEFAULT_DAYS,
    progress: Progress = QUIET,
) -> list[Verdict]:
    """Verify every job, `CONCURRENCY` at a time; verdicts in the jobs' order. `progress`
    is told of each job verified (`schedules.progress`)."""
    limit = asyncio.Semaphore(CONCURRENCY)
    jobs = list(jobs)

    async def one(job: JobSpec) -> Verdict:
        try:
            async with limit:
                return await verify_job(client, job, now, days)
        finally:
            progress.advance()

    progress.phase("verify", len(jobs))
    try:
        return list(await asyncio.gather(*(one(job) for job in jobs)))
    finally:
        progress.close()


# --- after sync writes ------------------------------------------------------------------------


def keep_forced_utc(target: Any, stored: ScheduleSpec, now: datetime) -> None:
    """Keep a job that sync forced to UTC calendars (the server's database disagreed) in
    UTC: its target is recompiled so, with the digest to match, before the plan compares."""
    if forced_utc(stored) and not forced_utc(target.schedule.spec):
        _force_utc(target, now)


def _force_utc(target: Any, now: datetime) -> None:
    spec = target.job.timing.spec(now, utc=True)
    target.schedule = dataclasses.replace(target.schedule, spec=spec)
    target.digest = schedule_digest(target.schedule)


async def verify_written(
    client: Client,
    targets: Sequence[Any],
    now: datetime,
    rewrite: Callable[[Any], Awaitable[None]],
) -> tuple[list[str], list[Verdict]]:
    """Verify the schedules sync just wrote whose fire times depend on the server's time
    zone database (calendars in a zone other than UTC); recompile a diverging one to UTC
    calendars, `rewrite` it, and verify it again.

    A spec in UTC or of intervals fires alike on every server (its times are the spec's
    own, and the model of Temporal's matching is proven on it), and recompiling could not
    change it: it is left to `verify`, which saves a server call per job where sync writes
    many (the first call on a new schedule is the dearest the server answers).

    Returns the lines for sync's report and the verdicts still not `ok`.
    """
    targets = [t for t in targets if depends_on_server_zones(t.schedule.spec)]
    verdicts = await verify_jobs(client, [t.job for t in targets], now)
    by_id = {t.job.id: t for t in targets}
    notes: list[str] = []
    failed: list[Verdict] = []
    retried = []
    for verdict in verdicts:
        target = by_id[verdict.job_id]
        spec = target.schedule.spec
        if verdict.status == "diverges" and depends_on_server_zones(spec):
            notes.append(
                f"{verdict.job_id}: the server fired other times than intended on "
                f"{_days_text(verdict)} with calendars in {spec.time_zone_name}; "
                "recompiled to UTC calendars and checked again"
            )
            _force_utc(target, now)
            retried.append(target)
        elif verdict.status != "ok":
            failed.append(verdict)
    if retried:
        await asyncio.gather(*(rewrite(t) for t in retried))
        for verdict in await verify_jobs(client, [t.job for t in retried], now):
            if verdict.status != "ok":
                failed.append(verdict)
    return notes, failed


def depends_on_server_zones(spec: ScheduleSpec) -> bool:
    """Whether the server reads `spec` with its own time zone database: calendars in a
    zone other than UTC (intervals and UTC calendars are the same on every server)."""
    return bool(spec.calendars) and (spec.time_zone_name or "UTC") not in UTC_NAMES


def _days_text(verdict: Verdict) -> str:
    days = [d.day.isoformat() for d in verdict.divergences]
    return ", ".join(days[:3]) + (f" and {len(days) - 3} more day(s)" if len(days) > 3 else "")
