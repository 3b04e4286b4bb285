"""Fire times against a brute-force oracle written here, sharing no code with `timing/`.

Random crons of the catalog's grammar (docs/catalog.md), in zones whose offsets change
(hour, half-hour and two-hour changes, changes at local midnight, negative DST, a zone that
dropped DST), over ranges around those changes, with and without a business calendar and
each `on_holiday` rule. The oracle walks every minute of the range in UTC, reads the local
time with `zoneinfo` (from the same `tzdata` files, loaded here), and applies the rules of
docs/time-zones.md and docs/calendars.md as they are written:

- fixed hour (no `*` and no step in the hour field): a local time in a gap runs once, at
  the first valid instant after it; a repeated one runs once, at its first occurrence;
- any other hour: local times in a gap do not happen, repeated ones happen twice;
- a fire time on a non-business local date is skipped or moved to the business day the
  rule names, at the same wall-clock time there (fixed-hour rule if it is in a gap or
  repeated); a run never moves more than 31 days.

The calendar's holidays come from the `holidays` package directly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import cache, cached_property
from importlib import resources
from zoneinfo import ZoneInfo

import holidays
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from timing import TICK, Timing
from timing.business import BusinessCalendar, CalendarRule

MINUTE = timedelta(minutes=1)
ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",  # 30-minute DST
    "America/Santiago",  # changes at local midnight
    "Asia/Tehran",  # DST until 2022, at midnight
    "Antarctica/Troll",  # two-hour DST
    "Europe/Dublin",  # negative DST in winter
    "Asia/Tokyo",  # no change
]
BASES = [None, "NYSE", "US", "GB-ENG"]
RULES = ["skip", "following", "preceding", "modified_following"]
FIELDS = {  # the grammar's fields: (low, high, names)
    "second": (0, 59, None),
    "minute": (0, 59, None),
    "hour": (0, 23, None),
    "day-of-month": (1, 31, None),
    "month": (1, 12, "jan feb mar apr may jun jul aug sep oct nov dec".split()),
    "day-of-week": (0, 7, "sun mon tue wed thu fri sat".split()),
    "year": (2000, 2100, None),
}


# --- the oracle's time zone database: the tzdata package's files, read with zoneinfo -----


@cache
def tz(name: str) -> ZoneInfo:
    path = resources.files("tzdata").joinpath("zoneinfo", *name.split("/"))
    with path.open("rb") as f:
        return ZoneInfo.from_file(f, key=name)


def local(instant: datetime, zone: str) -> datetime:
    """The naive local time of `instant`, with `fold` 1 on the second of a repeated time."""
    return instant.astimezone(tz(zone)).replace(tzinfo=None)


@cache
def changes(zone: str, year: int) -> tuple[datetime, ...]:
    """The instants `zone` changes its UTC offset in `year` (scan every 6 hours, then halve
    to the minute)."""
    found = []
    at = datetime(year, 1, 1, tzinfo=UTC)
    offset = tz(zone).utcoffset(at)
    while at.year == year:
        after = at + timedelta(hours=6)
        if tz(zone).utcoffset(after) != offset:
            low, high = at, after
            while high - low > MINUTE:
                mid = low + (high - low) // 2
                mid = mid.replace(second=0, microsecond=0)
                if tz(zone).utcoffset(mid) == offset:
                    low = mid
                else:
                    high = mid
            found.append(high)
            offset = tz(zone).utcoffset(after)
        at = after
    return tuple(found)


# --- crons: generated as field elements, rendered to text, matched here --------------------


@dataclass(frozen=True)
class Field:
    name: str
    elements: tuple[str, ...]  # `*`, `N`, `N-M`, each maybe `/S`; names for month and weekday

    @property
    def text(self) -> str:
        return ",".join(self.elements)

    @cached_property
    def values(self) -> frozenset[int]:
        low, high, _ = FIELDS[self.name]
        found: set[int] = set()
        for element in self.elements:
            base, _, step = element.partition("/")
            if base == "*":
                first, last = low, high
            elif "-" in base:
                a, b = base.split("-")
                first, last = number(self.name, a), number(self.name, b)
            else:
                first = number(self.name, base)
                last = high if step else first
            found.update(range(first, last + 1, int(step) if step else 1))
        if self.name == "day-of-week":
            found = {v % 7 for v in found}  # 7 is Sunday too
        return frozenset(found)


def number(name: str, token: str) -> int:
    names = FIELDS[name][2]
    if token.isdigit():
        return int(token)
    assert names is not None
    return names.index(token.lower()) + (1 if name == "month" else 0)


@st.composite
def elements(draw, name: str) -> str:
    low, high, names = FIELDS[name]
    kind = draw(st.sampled_from(["value", "range", "step", "start-step", "range-step"]))
    a = draw(st.integers(low, high))
    b = draw(st.integers(a, high))
    step = draw(st.integers(1, max(1, (high - low) // 2)))

    def show(n: int) -> str:
        if names and draw(st.booleans()) and n - (1 if name == "month" else 0) < len(names):
            word = names[n - (1 if name == "month" else 0)]
            return draw(st.sampled_from([word, word.upper(), word.title()]))
        return str(n)

    if kind == "value":
        return show(a)
    if kind == "range":
        return f"{show(a)}-{show(b)}"
    if kind == "step":
        return f"*/{step}"
    if kind == "start-step":
        return f"{show(a)}/{step}"
    return f"{show(a)}-{show(b)}/{step}"


@st.composite
def fields(draw, name: str, star: float = 0.5) -> Field:
    if draw(st.floats(0, 1)) < star:
        return Field(name, ("*",))
    return Field(name, tuple(draw(st.lists(elements(name), min_size=1, max_size=3))))


@dataclass(frozen=True)
class Cron:
    second: Field
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field
    year: Field | None
    seconds_given: bool

    @property
    def text(self) -> str:
        parts = [self.minute, self.hour, self.dom, self.month, self.dow]
        if self.seconds_given:
            parts = [self.second, *parts]
        if self.year is not None:
            parts.append(self.year)
        return " ".join(p.text for p in parts)

    @property
    def fixed_hour(self) -> bool:
        return "*" not in self.hour.text and "/" not in self.hour.text

    def matches_day(self, day: date) -> bool:
        if self.year is not None and self.year.text != "*" and day.year not in self.year.values:
            return False
        if day.month not in self.month.values:
            return False
        in_dom = day.day in self.dom.values
        in_dow = day.isoweekday() % 7 in self.dow.values
        if self.dom.text != "*" and self.dow.text != "*":
            return in_dom or in_dow  # classic cron: either
        return in_dom and in_dow

    def matches_minute(self, at: datetime) -> bool:
        return (
            at.minute in self.minute.values
            and at.hour in self.hour.values
            and self.matches_day(at.date())
        )

    def never_fires(self) -> bool:
        """The grammar's refusal: a day-of-month no month (of its years) has."""
        if self.dow.text != "*" or self.dom.text == "*":
            return False
        years = sorted(self.year.values) if self.year is not None else [2000]
        first = min(self.dom.values)
        return not any(first <= month_days(y, m) for y in years for m in self.month.values)


def month_days(year: int, month: int) -> int:
    return ((date(year + month // 12, month % 12 + 1, 1)) - date(year, month, 1)).days


@st.composite
def crons(draw, year: int) -> Cron:
    seconds_given = draw(st.integers(0, 4)) == 0
    with_year = seconds_given or draw(st.integers(0, 5)) == 0
    if seconds_given:  # few seconds a minute: the oracle's work grows with them
        second = draw(
            st.one_of(
                st.sampled_from(["*/15", "*/20", "*/30", "10/20"]).map(
                    lambda e: Field("second", (e,))
                ),
                st.lists(st.integers(0, 59), min_size=1, max_size=3).map(
                    lambda vs: Field("second", tuple(str(v) for v in vs))
                ),
            )
        )
    else:
        second = Field("second", ("0",))
    year_field = None
    if with_year:
        year_field = draw(
            st.one_of(
                st.just(Field("year", ("*",))),
                st.just(Field("year", (str(year),))),
                st.just(Field("year", (f"{max(year - 1, 2000)}-{min(year + 1, 2100)}",))),
                fields("year", star=0),
            )
        )
        if year_field.text == "*" and not seconds_given:
            year_field = Field("year", (str(year),))  # 6 fields ending in `*` are refused
    return Cron(
        second=second,
        minute=draw(fields("minute", star=0.2)),
        hour=draw(fields("hour", star=0.4)),
        dom=draw(fields("day-of-month", star=0.6)),
        month=draw(fields("month", star=0.7)),
        dow=draw(fields("day-of-week", star=0.6)),
        year=year_field,
        seconds_given=seconds_given,
    )


# --- the oracle ---------------------------------------------------------------------------


def plain_fires(cron: Cron, zone: str, start: datetime, end: datetime) -> dict[datetime, date]:
    """Every fire time in `[start, end)` -> the local date it is a fire time of, by walking
    every minute in UTC and reading the local clock."""
    fixed = cron.fixed_hour
    seconds = sorted(cron.second.values)
    found: dict[datetime, date] = {}
    at = start.replace(second=0, microsecond=0)
    before = local(at - MINUTE, zone)
    while at < end:
        now = local(at, zone)
        if cron.matches_minute(now) and not (fixed and now.fold == 1):
            for s in seconds:
                found[at + timedelta(seconds=s)] = now.date()
        if fixed and now - before.replace(fold=0) > MINUTE:  # a gap: local times skipped
            skipped = before.replace(fold=0) + MINUTE
            while skipped < now.replace(fold=0):
                if cron.matches_minute(skipped):
                    found[at] = skipped.date()  # first valid instant after the gap
                    break
                skipped += MINUTE
        before = now
        at += MINUTE
    return {t: d for t, d in found.items() if start <= t < end}


def wall_instant(wall: datetime, zone: str) -> datetime:
    """When naive local `wall` happens: its first occurrence, or if it does not exist, the
    first valid instant after the gap."""
    first = wall.replace(tzinfo=tz(zone), fold=0).astimezone(UTC)
    if local(first, zone).replace(fold=0) == wall:
        earlier = wall.replace(tzinfo=tz(zone), fold=1).astimezone(UTC)
        return min(first, earlier)
    at = first.replace(second=0, microsecond=0)
    while local(at - MINUTE, zone).replace(fold=0) > wall:
        at -= MINUTE
    return at


@cache
def holiday_source(base: str) -> holidays.HolidayBase:
    if base == "NYSE":
        return holidays.financial_holidays("NYSE")
    country, _, subdiv = base.partition("-")
    return holidays.country_holidays(country, subdiv=subdiv or None)


@dataclass(frozen=True)
class Calendar:
    base: str | None
    off: frozenset[date]
    on: frozenset[date]
    rule: str

    def business(self, day: date) -> bool:
        if day in self.on:
            return True
        if day in self.off:
            return False
        if self.base is not None and day in holiday_source(self.base):
            return False
        return day.weekday() < 5

    def target(self, day: date) -> date | None:
        if self.business(day):
            return day
        after = next(
            (day + timedelta(n) for n in range(1, 32) if self.business(day + timedelta(n))), None
        )
        before = next(
            (day - timedelta(n) for n in range(1, 32) if self.business(day - timedelta(n))), None
        )
        if self.rule == "following":
            return after
        if self.rule == "preceding":
            return before
        if self.rule == "modified_following":
            return after if after is not None and after.month == day.month else before
        return None  # skip

    def product(self) -> CalendarRule:
        calendar = BusinessCalendar(
            name="test",
            base=self.base,
            extra_holidays=tuple(sorted(self.off)),
            extra_working_days=tuple(sorted(self.on)),
        )
        return CalendarRule(calendar=calendar, on_holiday=self.rule)


def calendar_fires(
    cron: Cron, zone: str, calendar: Calendar, start: datetime, end: datetime
) -> list[tuple[datetime, datetime]]:
    """(when it runs, slot) for every run in `[start, end)`."""
    first, last = local(start, zone).date(), local(end, zone).date()
    found = []
    day = first - timedelta(days=33)
    while day <= last + timedelta(days=33):
        target = calendar.target(day) if cron.matches_day(day) else None
        if target is not None and first - timedelta(1) <= target <= last + timedelta(1):
            midnight = datetime.combine(day, time(), tz(zone)).astimezone(UTC)
            window = plain_fires(
                cron, zone, midnight - timedelta(hours=3), midnight + timedelta(hours=27)
            )
            for slot, of in window.items():
                if of != day:
                    continue
                at = (
                    slot
                    if target == day
                    else wall_instant(datetime.combine(target, local(slot, zone).time()), zone)
                )
                if start <= at < end:
                    found.append((at, slot))
        day += timedelta(days=1)
    return sorted(found)


# --- the property -------------------------------------------------------------------------


@st.composite
def cases(draw):
    zone = draw(st.sampled_from(ZONES))
    year = draw(st.integers(2000, 2040))
    near = changes(zone, year)
    if near and draw(st.integers(0, 3)) > 0:
        anchor = draw(st.sampled_from(near))
    else:
        anchor = datetime(year, 1, 1, tzinfo=UTC) + timedelta(minutes=draw(st.integers(0, 525000)))
    start = anchor - timedelta(seconds=draw(st.integers(0, 36 * 3600)))
    end = anchor + timedelta(seconds=draw(st.integers(1, 36 * 3600)))
    cron = draw(crons(year))
    if near and anchor in near and draw(st.booleans()):
        # Aim at the change: the local hours either side of it, on any day.
        hours = sorted({local(anchor - MINUTE, zone).hour, local(anchor, zone).hour})
        hour = Field("hour", tuple(str(h) for h in hours))
        if draw(st.booleans()):
            hour = Field("hour", (f"{hours[0]}-{hours[-1]}",))
        star = Field("day-of-month", ("*",))
        cron = replace(
            cron,
            hour=hour,
            dom=star,
            dow=Field("day-of-week", ("*",)),
            month=Field("month", ("*",)),
        )
    calendar = None
    if draw(st.booleans()):
        around = st.dates(start.date() - timedelta(10), end.date() + timedelta(10))
        off = frozenset(draw(st.lists(around, max_size=3)))
        on = frozenset(draw(st.lists(around, max_size=2))) - off
        calendar = Calendar(draw(st.sampled_from(BASES)), off, on, draw(st.sampled_from(RULES)))
    return zone, cron, start, end, calendar


@settings(max_examples=settings.default.max_examples * 4)  # fast: 4x the profile's budget
@given(cases())
def test_fire_times_match_a_minute_by_minute_walk(case) -> None:
    zone, cron, start, end, calendar = case
    note(f"cron {cron.text!r} in {zone}, [{start}, {end}), calendar {calendar}")
    if cron.never_fires():
        try:
            Timing(cron=cron.text, timezone=zone)
        except ValueError as exc:
            assert "day-of-month" in str(exc)
            return
        raise AssertionError(f"{cron.text!r} never fires, and was accepted")
    timing = Timing(
        cron=cron.text,
        timezone=zone,
        calendar=calendar.product() if calendar is not None else None,
    )
    if calendar is None:
        expected = [(t, t) for t in sorted(plain_fires(cron, zone, start, end))]
    else:
        expected = calendar_fires(cron, zone, calendar, start, end)
    got = [(f.at, f.slot) for f in timing.fires(start, end)]
    event(
        f"fixed={cron.fixed_hour} calendar={calendar is not None} fires={min(len(expected), 3)} change={any(start <= c < end for c in changes(zone, start.year))}"
    )
    assert got == expected
    times = sorted({at for at, _ in expected})
    assert timing.fire_times(start, end) == times
    following = timing.next_after(start - TICK)
    if times:
        assert following == times[0]
    else:
        assert following is None or following >= end
    if times:
        assert timing.fire_times(start, end, limit=2, newest=True) == times[-2:]
