"""`Timing`: when a job fires, as one typed value with the one API for its fire times.

A frozen pydantic model (cron or interval, time zone, start_at, end_at, jitter), so it can
travel in workflow inputs and be compared and hashed. Everything that asks "when does this
job fire" asks it: the catalog (`JobSpec.timing`), the schedule compiler, `next`,
`backfill`, `check` and `verify`.

- `fire_times(start, end, limit=..., newest=...)`: the fire times in `[start, end)`;
- `next_after(t)` / `last_before(t)` / `upcoming(after, count)`;
- `spec(now)`: the Temporal `ScheduleSpec` that fires exactly these times (`timing.calendars`).

The job's own `start_at` and `end_at` bound every answer and are inclusive, as Temporal's.
Fire times are nominal: the schedule's jitter delays each start by up to `jitter`.

With a business `calendar` (`timing.business`), the fire times are the *adjusted* ones, when
the server fires and the runs happen; each runs one or more *slots*, the unadjusted fire
times that key the ledger: `fires(...)` pairs them, `slots_at(t)` names a fire time's slots,
`what_of(slot)` says what the calendar did to one. Without a calendar a fire time is its own
slot.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from functools import cached_property
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, model_serializer, model_validator
from temporalio.client import ScheduleIntervalSpec, ScheduleSpec

from timing.business import CalendarRule, Fire, Grid
from timing.business_spec import compile_business_spec
from timing.calendars import compile_spec
from timing.cron import Cron, CronError, parse_cron
from timing.firetimes import (
    cron_fires,
    cron_fires_newest,
    interval_fires,
    next_cron_fire,
    next_interval_fire,
)
from timing.gaps import longest_gap
from timing.zones import TICK, zone, zone_problem

# Times a job's bounds may name: Temporal's calendars match no later year, and nothing in
# this project ran before 1970.
FIRST_YEAR, LAST_YEAR = 1970, 2100


class TimingProblems(ValueError):
    """Every problem of one timing across its fields, each "field: message"."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _valid_cron(value: str) -> str:
    try:
        parse_cron(value)
    except CronError as exc:  # the message names the cron's field and value
        raise ValueError(exc.detail) from None
    return value


def _valid_zone(value: str) -> str:
    problem = zone_problem(value, legacy=True)
    if problem is not None:
        raise ValueError(problem)
    return value


def _chosen_zone(value: str) -> str:
    problem = zone_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _valid_instant(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError(f"needs a UTC offset, e.g. 2027-01-01T00:00:00Z, got {value}")
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise ValueError(f"must lie in the years {FIRST_YEAR} to {LAST_YEAR}, got {value}")
    return value


# The field types of a timing, shared with the catalog (`schedules` `JobSpec`), so a job's
# fields are refused with the same words as its `Timing`'s.
CronText = Annotated[str, AfterValidator(_valid_cron)]
ZoneName = Annotated[str, AfterValidator(_valid_zone)]
# What a job or schedule being written may name: no legacy zone (`timing.zones.LEGACY_ZONES`).
# A timing already stored or recorded reads as `ZoneName`.
ChosenZoneName = Annotated[str, AfterValidator(_chosen_zone)]
Instant = Annotated[datetime, AfterValidator(_valid_instant)]


class Timing(BaseModel):
    """When a job fires: a cron (`timing.cron`'s grammar) read in `timezone`, or a fixed
    `interval` counted from the Unix epoch; bounded by `start_at` / `end_at`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cron: CronText | None = None
    interval: timedelta | None = None
    timezone: ZoneName = "UTC"
    start_at: Instant | None = None
    end_at: Instant | None = None
    jitter: timedelta = timedelta(0)
    # Business days and what a holiday's fire time does (`timing.business`); None: every day.
    calendar: CalendarRule | None = None

    @model_serializer(mode="wrap")
    def _without_no_calendar(self, handler: Any) -> Any:
        """Leave `calendar` out when there is none, so a worker of the release before it
        (whose `Timing` forbids unknown fields) still reads every other job's input."""
        data = handler(self)
        if self.calendar is None and isinstance(data, dict):
            data.pop("calendar", None)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = []
        if self.calendar is not None and self.cron is None:
            problems.append(
                "calendar: needs a cron (an interval job runs on elapsed time, not on days)"
            )
        if (self.cron is None) == (self.interval is None):
            problems.append("cron / interval: give exactly one of them")
        elif self.interval is not None and self.interval < timedelta(seconds=1):
            problems.append(f"interval: must be at least 1s, got {self.interval}")
        elif self.jitter >= (period := self.period()):
            problems.append(f"jitter: {self.jitter} is not shorter than the period {period}")
        if self.start_at and self.end_at and self.start_at >= self.end_at:
            problems.append(f"start_at: {self.start_at} is not before end_at {self.end_at}")
        if problems:
            raise TimingProblems(problems)
        return self

    # --- what it is ----------------------------------------------------------------------

    @cached_property
    def expression(self) -> Cron | None:
        """The parsed cron (None for an interval job)."""
        return parse_cron(self.cron) if self.cron is not None else None

    @cached_property
    def grid(self) -> Grid | None:
        """The cron, zone, bounds and calendar rule of a calendar job (None: no calendar)."""
        if self.calendar is None or self.expression is None:
            return None
        return Grid(self.expression, self.timezone, self.start_at, self.end_at, self.calendar)

    @property
    def plain(self) -> Timing:
        """This timing without its calendar: the grid of unadjusted fire times."""
        if self.calendar is None:
            return self
        # Built anew, not `model_copy`: that would carry the cached `grid` over.
        return Timing.model_validate(self.model_dump(exclude={"calendar"}))

    @property
    def fixed_hour(self) -> bool:
        """Whether the job keeps its wall-clock time across DST (its hour field names hours
        outright); interval jobs follow elapsed time."""
        return self.expression is not None and self.expression.fixed_hour

    @property
    def text(self) -> str:
        """`30 2 * * *` or `every 0:00:30`."""
        return self.cron if self.cron is not None else f"every {self.interval}"

    def longest_gap(self, year: int) -> timedelta | None:
        """The longest time between a fire time in `year` (local dates) and the next, DST
        included (`timing.gaps`); None if the job fires fewer than twice from `year` on."""
        if self.interval is not None:
            return self.interval
        assert self.expression is not None
        gap = longest_gap(self.expression, self.timezone, year)
        if gap is None or self.grid is None:
            return gap
        # Runs move only across non-business days, so a longer gap than the cron's own
        # spans one of them: measure each, from the run before it to the run after it.
        tz = zone(self.timezone)
        for first, last in self.grid.closures(year):
            before = self.last_before(datetime.combine(first, time(), tz).astimezone(UTC))
            after = self.next_after(
                datetime.combine(last + timedelta(days=1), time(), tz).astimezone(UTC) - TICK
            )
            if before is not None and after is not None and before.astimezone(tz).year == year:
                gap = max(gap, after - before)
        return gap

    def period(self) -> timedelta:
        """The shortest gap between two fire times by the wall clock (DST aside)."""
        if self.interval is not None:
            return self.interval
        assert self.expression is not None
        return self.expression.shortest_gap()

    # --- when it fires -------------------------------------------------------------------

    def _bounds(self, start: datetime | None, end: datetime) -> tuple[datetime | None, datetime]:
        if self.start_at is not None:
            start = self.start_at if start is None else max(start, self.start_at)
        if self.end_at is not None:
            end = min(end, self.end_at + TICK)
        return start, end

    def fire_times(
        self,
        start: datetime | None,
        end: datetime,
        *,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[datetime]:
        """The fire times in `[start, end)` (UTC, oldest first) within the job's bounds.

        `limit` keeps the oldest `limit`, or with `newest` the newest. `start` None (no
        lower bound) needs `newest` and a `limit`.
        """
        if start is None and not (newest and limit is not None):
            raise ValueError("fire_times without a start needs newest=True and a limit")
        if limit is not None and limit <= 0:
            return []
        if self.grid is not None:
            return self.grid.times(start, end, limit, newest)
        start, end = self._bounds(start, end)
        if start is not None and start >= end:
            return []
        if self.interval is not None:
            return interval_fires(self.interval, start, end, limit, newest)
        assert self.expression is not None
        if newest and limit is not None:
            return cron_fires_newest(self.expression, self.timezone, start, end, limit)
        assert start is not None
        found = cron_fires(self.expression, self.timezone, start, end, None if newest else limit)
        return found[-limit:] if newest and limit is not None else found

    def fires(self, start: datetime | None, end: datetime, **bounds: Any) -> list[Fire]:
        """Each slot whose fire time is in `[start, end)` with that fire time, ordered by
        (fire time, slot); `limit` fire times at most (the oldest, or with `newest` the
        newest), as `fire_times`. Without a calendar each fire time is its own slot."""
        if self.grid is None:
            return [Fire(t, t) for t in self.fire_times(start, end, **bounds)]
        limit, newest = bounds.get("limit"), bounds.get("newest", False)
        if start is None and not (newest and limit is not None):
            raise ValueError("fires without a start needs newest=True and a limit")
        return self.grid.fires(start, end, limit, newest)

    def slots_at(self, instant: datetime) -> list[datetime]:
        """The slots a fire at `instant` runs, oldest first (none: not a fire time)."""
        if self.grid is not None:
            return [f.slot for f in self.grid.at(instant)]
        return [instant] if self.fire_times(instant, instant + TICK) == [instant] else []

    def run_at(self, slot: datetime) -> datetime | None:
        """When the slot `slot` runs: itself, or where its calendar moves it (None: its
        calendar skips it)."""
        if self.grid is None:
            return slot
        return self.grid.due(slot)

    def what_of(self, slot: datetime) -> str:
        """What the calendar does to the unadjusted fire time `slot`: '' (nothing: no
        calendar, or a business day), `moved from ... to ...: NYSE holiday (...)`, or
        `skipped on ...`."""
        return "" if self.grid is None else self.grid.what_of(slot)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire time strictly after `instant` (None: none, within the bounds)."""
        if self.grid is not None:
            found = self.fire_times(instant + TICK, _END_OF_CALENDARS, limit=1)
            return found[0] if found else None
        if self.start_at is not None and instant < self.start_at:
            instant = self.start_at - TICK
        if self.interval is not None:
            found: datetime | None = next_interval_fire(self.interval, instant)
        else:
            assert self.expression is not None
            found = next_cron_fire(self.expression, self.timezone, instant)
        if found is None or (self.end_at is not None and found > self.end_at):
            return None
        return found

    def last_before(self, instant: datetime) -> datetime | None:
        """The newest fire time strictly before `instant` (None: none, within the bounds)."""
        found = self.fire_times(None, instant, limit=1, newest=True)
        return found[0] if found else None

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        """The next `count` fire times strictly after `after`."""
        return self.fire_times(after + TICK, _END_OF_CALENDARS, limit=count)

    # --- on the server -------------------------------------------------------------------

    def spec(self, now: datetime, *, utc: bool = False) -> ScheduleSpec:
        """The Temporal `ScheduleSpec` that fires these times (`timing.calendars`).

        `now` places a UTC compilation's horizon; `utc` asks for UTC calendars even where
        calendars in the job's zone are right by the model of Temporal's matching.
        """
        if self.grid is not None:
            return compile_business_spec(self.grid, jitter=self.jitter, now=now)
        if self.interval is not None:
            return ScheduleSpec(
                intervals=[ScheduleIntervalSpec(every=self.interval)],
                time_zone_name=self.timezone,
                start_at=self.start_at,
                end_at=self.end_at,
                jitter=self.jitter,
            )
        assert self.expression is not None
        return compile_spec(
            self.expression,
            self.timezone,
            start_at=self.start_at,
            end_at=self.end_at,
            jitter=self.jitter,
            now=now,
            utc=utc,
        )


_END_OF_CALENDARS = datetime(2101, 1, 1, tzinfo=UTC)  # Temporal's calendars match no later year
