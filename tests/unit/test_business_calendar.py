"""Business calendars: golden fire lists 2026-2030 of the reference jobs against an oracle
written here, the compiled Temporal specs against the same oracle, and each rule's edges.

The oracle shares nothing with `timing/`: the closures are typed in from the exchanges' and
the government's published lists (NYSE full-day closures; US federal holidays as observed),
business days are weekdays not in them, and a moved run keeps its wall-clock time.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from activities.catchup.missed import PlanInput, PlanResult, _decide_for, run_origin
from activities.run.begin import due_at, origins
from schedules.catalog.model import default_catalog, parse_each
from tests.unit.calendar_match import utc_matching_times
from timing import Timing
from timing.business import BusinessCalendar, CalendarRule

NEW_YORK = ZoneInfo("America/New_York")
YEARS = range(2026, 2031)

# NYSE full-day closures 2026-2030 (the exchange's holiday calendar).
NYSE_CLOSED = {
    date.fromisoformat(d)
    for d in """
    2026-01-01 2026-01-19 2026-02-16 2026-04-03 2026-05-25 2026-06-19 2026-07-03 2026-09-07
    2026-11-26 2026-12-25 2027-01-01 2027-01-18 2027-02-15 2027-03-26 2027-05-31 2027-06-18
    2027-07-05 2027-09-06 2027-11-25 2027-12-24 2028-01-17 2028-02-21 2028-04-14 2028-05-29
    2028-06-19 2028-07-04 2028-09-04 2028-11-23 2028-12-25 2029-01-01 2029-01-15 2029-02-19
    2029-03-30 2029-05-28 2029-06-19 2029-07-04 2029-09-03 2029-11-22 2029-12-25 2030-01-01
    2030-01-21 2030-02-18 2030-04-19 2030-05-27 2030-06-19 2030-07-04 2030-09-02 2030-11-28
    2030-12-25
    """.split()
}
# US federal holidays 2026-2030 that fall in the first week of a month (observed dates):
# the only ones a job on the 1st can meet.
US_EARLY_HOLIDAYS = {
    date.fromisoformat(d)
    for d in "2026-01-01 2027-01-01 2028-09-04 2029-01-01 2029-09-03 2030-01-01 2030-09-02".split()
}


def business(day: date, closed: set[date]) -> bool:
    return day.weekday() < 5 and day not in closed


def oracle_card_settlement(year: int) -> list[datetime]:
    """Every real minute whose New York date is an NYSE business day."""
    found = []
    day = date(year, 1, 1)
    while day.year == year:
        if business(day, NYSE_CLOSED):
            start = datetime(day.year, day.month, day.day, tzinfo=NEW_YORK).astimezone(UTC)
            following = day + timedelta(days=1)
            end = datetime(following.year, following.month, following.day, tzinfo=NEW_YORK)
            minutes = int((end.astimezone(UTC) - start).total_seconds() // 60)
            found += [start + timedelta(minutes=m) for m in range(minutes)]
        day += timedelta(days=1)
    return found


def oracle_monthly_billing() -> list[tuple[datetime, datetime]]:
    """(run, slot): 03:00 New York on the 1st, moved to the next US business day at 03:00."""
    pairs = []
    for year in YEARS:
        for month in range(1, 13):
            slot = datetime(year, month, 1, 3, tzinfo=NEW_YORK)
            day = slot.date()
            while not business(day, US_EARLY_HOLIDAYS):
                day += timedelta(days=1)
            run = datetime(day.year, day.month, day.day, 3, tzinfo=NEW_YORK)
            pairs.append((run.astimezone(UTC), slot.astimezone(UTC)))
    return pairs


def year_span(year: int) -> tuple[datetime, datetime]:
    return (
        datetime(year, 1, 1, tzinfo=NEW_YORK).astimezone(UTC),
        datetime(year + 1, 1, 1, tzinfo=NEW_YORK).astimezone(UTC),
    )


@pytest.mark.parametrize("year", YEARS)
def test_card_settlement_runs_every_minute_of_nyse_business_days(year):
    job = default_catalog()["card-settlement"]
    assert (job.calendar, job.on_holiday) == ("NYSE", "skip")
    start, end = year_span(year)
    assert job.timing.fire_times(start, end) == oracle_card_settlement(year)


def test_card_settlement_spec_fires_the_oracles_minutes():
    """What the server is given, matched plainly (the spec is in UTC), is the oracle's, on
    stretches with holidays, weekends and DST changes: each spec covers its year and two
    more, so one compiled in 2026 and one in 2029 cover 2026-2030."""
    job = default_catalog()["card-settlement"]
    for compiled_in, first, last in (
        (2026, date(2026, 10, 30), date(2027, 1, 5)),  # fall back, Thanksgiving, Christmas
        (2029, date(2030, 3, 8), date(2030, 4, 23)),  # spring forward, Good Friday
    ):
        spec = job.timing.spec(datetime(compiled_in, 6, 1, tzinfo=UTC))
        assert not spec.skip, "no skip lists: the server steps through every excluded time"
        assert len(spec.calendars) < 200
        start = datetime.combine(first, datetime.min.time(), NEW_YORK).astimezone(UTC)
        end = datetime.combine(last, datetime.min.time(), NEW_YORK).astimezone(UTC)
        wanted = [t for y in {first.year, last.year} for t in oracle_card_settlement(y)]
        assert utc_matching_times(spec, start, end) == [t for t in wanted if start <= t < end]


def test_monthly_billing_moves_to_the_following_business_day_2026_to_2030():
    job = default_catalog()["monthly-billing"]
    assert (job.calendar, job.on_holiday) == ("US", "following")
    expected = oracle_monthly_billing()
    start, end = year_span(2026)[0], year_span(2030)[1]
    fires = job.timing.fires(start, end)
    assert [(f.at, f.slot) for f in fires] == expected
    moved = {f.slot.date(): f.at.date() for f in fires if f.moved}
    assert moved == {
        date(2026, 1, 1): date(2026, 1, 2),  # New Year's Day, a Thursday
        date(2026, 8, 1): date(2026, 8, 3),  # a Saturday
        date(2026, 2, 1): date(2026, 2, 2),  # a Sunday
        date(2026, 3, 1): date(2026, 3, 2),
        date(2026, 11, 1): date(2026, 11, 2),
        date(2027, 1, 1): date(2027, 1, 4),  # New Year's Day, a Friday, then the weekend
        date(2027, 5, 1): date(2027, 5, 3),
        date(2027, 8, 1): date(2027, 8, 2),
        date(2028, 1, 1): date(2028, 1, 3),
        date(2028, 4, 1): date(2028, 4, 3),
        date(2028, 7, 1): date(2028, 7, 3),
        date(2028, 10, 1): date(2028, 10, 2),
        date(2029, 1, 1): date(2029, 1, 2),
        date(2029, 4, 1): date(2029, 4, 2),
        date(2029, 7, 1): date(2029, 7, 2),
        date(2029, 9, 1): date(2029, 9, 4),  # Saturday, Sunday, Labor Day
        date(2029, 12, 1): date(2029, 12, 3),
        date(2030, 1, 1): date(2030, 1, 2),
        date(2030, 6, 1): date(2030, 6, 3),
        date(2030, 9, 1): date(2030, 9, 3),  # Sunday, Labor Day
        date(2030, 12, 1): date(2030, 12, 2),
    }
    note = next(f.moved for f in fires if f.slot.date() == date(2027, 1, 1))
    assert note == "moved from Fri 2027-01-01 03:00 to Mon 2027-01-04: US holiday (New Year's Day)"
    for run, slot in expected:  # each run names its slot: the ledger key never moves
        assert job.timing.slots_at(run) == [slot]
    for compiled_in, years in ((2026, (2026, 2027, 2028)), (2029, (2029, 2030))):
        spec = job.timing.spec(datetime(compiled_in, 6, 1, tzinfo=UTC))
        first, last = year_span(years[0])[0], year_span(years[-1])[1]
        assert utc_matching_times(spec, first, last) == [
            r for r, _ in expected if first <= r < last
        ]


def rule(on_holiday: str, **calendar) -> CalendarRule:
    return CalendarRule(
        calendar=BusinessCalendar(**({"name": "NYSE", "base": "NYSE"} | calendar)),
        on_holiday=on_holiday,
    )


def ny(*args: int) -> datetime:
    return datetime(*args, tzinfo=NEW_YORK).astimezone(UTC)


def test_each_rule_on_good_friday_2027_and_a_month_end():
    daily = "0 9 * * *"
    good_friday = ny(2027, 3, 26, 9)
    where = {}
    for name in ("skip", "following", "preceding", "modified_following"):
        timing = Timing(cron=daily, timezone="America/New_York", calendar=rule(name))
        fires = timing.fires(ny(2027, 3, 25), ny(2027, 3, 30))
        where[name] = [f.at for f in fires if f.slot == good_friday]
    assert where == {
        "skip": [],
        "following": [ny(2027, 3, 29, 9)],
        "preceding": [ny(2027, 3, 25, 9)],
        "modified_following": [ny(2027, 3, 29, 9)],
    }
    # 31 July 2027 is a Saturday: modified following stays in July (Friday the 30th).
    month_end = Timing(
        cron="0 9 31 7 *", timezone="America/New_York", calendar=rule("modified_following")
    )
    assert month_end.next_after(ny(2027, 7, 1)) == ny(2027, 7, 30, 9)
    assert month_end.slots_at(ny(2027, 7, 30, 9)) == [ny(2027, 7, 31, 9)]


def test_extra_holidays_and_working_days_and_a_weekends_only_calendar():
    ops = rule(
        "following",
        name="ops",
        extra_holidays=[date(2027, 6, 7)],
        extra_working_days=[date(2027, 6, 5)],
    )
    timing = Timing(cron="0 9 * * 1", timezone="America/New_York", calendar=ops)
    # Monday 7 June is closed: it runs on Tuesday the 8th; Saturday the 5th is open.
    assert timing.next_after(ny(2027, 6, 2)) == ny(2027, 6, 8, 9)
    assert "ops holiday (an extra holiday of the calendar)" in timing.what_of(ny(2027, 6, 7, 9))
    saturday = Timing(cron="0 9 * * 6", timezone="America/New_York", calendar=ops)
    assert saturday.next_after(ny(2027, 6, 2)) == ny(2027, 6, 5, 9)
    assert ops.calendar.version.startswith("holidays ") and "+" in ops.calendar.version
    weekdays = rule("skip", name="weekdays", base=None)
    every_day = Timing(cron="0 9 * * *", timezone="UTC", calendar=weekdays)
    start = datetime(2027, 1, 1, tzinfo=UTC)
    assert len(every_day.fire_times(start, start + timedelta(days=14))) == 10
    assert every_day.what_of(datetime(2027, 1, 2, 9, tzinfo=UTC)).startswith(
        "skipped on Sat 2027-01-02: weekend"
    )


def test_a_moved_run_keeps_its_wall_clock_time_across_a_dst_change():
    """Sunday 14 March 2027 springs forward in New York: its 02:30 run is at 03:00 EDT
    (the gap rule); moved to Friday 12 March it keeps 03:00, now EST."""
    timing = Timing(cron="30 2 * * *", timezone="America/New_York", calendar=rule("preceding"))
    fires = timing.fires(ny(2027, 3, 12), ny(2027, 3, 13))
    assert [(f.at, f.slot) for f in fires] == [
        (ny(2027, 3, 12, 2, 30), ny(2027, 3, 12, 2, 30)),
        (ny(2027, 3, 12, 2, 30), ny(2027, 3, 13, 2, 30)),
        (ny(2027, 3, 12, 3, 0), datetime(2027, 3, 14, 7, tzinfo=UTC)),
    ]
    spec = timing.spec(datetime(2027, 1, 1, tzinfo=UTC))
    start, end = year_span(2027)
    assert utc_matching_times(spec, start, end) == timing.fire_times(start, end)


def test_a_timing_without_a_calendar_serialises_as_before():
    assert "calendar" not in Timing(cron="0 9 * * *").model_dump(mode="json")
    job = default_catalog()["monthly-billing"]
    dumped = job.timing.model_dump(mode="json")
    assert dumped["calendar"]["on_holiday"] == "following"
    assert Timing.model_validate(dumped) == job.timing


BASE = {"kind": "nightly-reconcile", "cron": "0 2 * * *", "timezone": "America/New_York"}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"j": BASE | {"calendar": "NYSEE"}},
            "job 'j': calendar: unknown calendar 'NYSEE': neither one of the catalog's "
            "[calendars] nor a market or country of the holidays package",
        ),
        (
            {"j": BASE | {"calendar": "US", "on_holiday": "sideways"}},
            "job 'j': on_holiday: Input should be 'skip', 'following', 'preceding' or "
            "'modified_following' (got 'sideways')",
        ),
        (
            {"j": BASE | {"on_holiday": "skip"}},
            "job 'j': on_holiday: needs a calendar to say which days are holidays (got 'skip')",
        ),
        (
            {
                "j": {
                    "kind": "nightly-reconcile",
                    "interval": "1h",
                    "timezone": "UTC",
                    "calendar": "US",
                }
            },
            "job 'j': calendar: needs a cron (an interval job runs on elapsed time, not on days)",
        ),
        (
            {"calendars": {"ops": {"extra_holidays": ["2027-02-30"]}}},
            "calendar 'ops': extra_holidays: Input should be a valid date or datetime, day "
            "value is outside expected range (got '2027-02-30')",
        ),
        (
            {"calendars": {"ops": {"base": "ZZ"}}},
            "calendar 'ops': base: is not a calendar of the holidays package",
        ),
        (
            {
                "calendars": {
                    "ops": {"extra_holidays": ["2027-06-07"], "extra_working_days": ["2027-06-07"]}
                }
            },
            "calendar 'ops': calendar: extra_holidays: 2027-06-07 is also an extra working day",
        ),
        (
            {"calendars": {"NYSE": {"base": "NYSE"}}},
            "calendar 'NYSE': is the holidays package's own calendar NYSE",
        ),
        (
            {"calendars": {"ops": {"base": "US", "holidays": []}}},
            "calendar 'ops': holidays: is not a setting",
        ),
    ],
)
def test_a_bad_calendar_or_rule_is_one_line_naming_field_and_value(data, problem):
    _, problems = parse_each(data)
    (lines,) = problems.values()
    assert len(lines) == 1 and lines[0].startswith(problem), lines


def test_a_job_names_a_calendar_the_catalog_defines():
    jobs, problems = parse_each(
        {
            "calendars": {"ops": {"base": "NYSE", "extra_holidays": [date(2027, 6, 7)]}},
            "j": BASE | {"calendar": "ops", "on_holiday": "following"},
        }
    )
    assert not problems
    (job,) = jobs
    assert job.calendar_rule.calendar.extra_holidays == (date(2027, 6, 7),)
    assert job.timing.next_after(ny(2027, 6, 6, 12)) == ny(2027, 6, 8, 2)


def plan_at(at: datetime, timing: Timing, **fields) -> PlanInput:
    data = {"job_name": "j", "scheduled_at": at, "started_at": at, "workflow_id": "w"}
    return PlanInput(**(data | {"run_id": "r", "timing": timing} | fields))


def test_a_fire_time_runs_the_slots_its_calendar_puts_there():
    """Christmas 2026 (a Friday) and its weekend move to Monday 28 December, 09:00: the run
    Temporal starts then covers the four slots, each its own ledger key, all its own."""
    daily = Timing(cron="0 9 * * *", timezone="America/New_York", calendar=rule("following"))
    monday, thursday = ny(2026, 12, 28, 9), ny(2026, 12, 24, 9)
    on_time = plan_at(monday, daily)
    decision = _decide_for(on_time, monday, thursday, thursday, monday, {thursday})
    assert decision.run == [ny(2026, 12, d, 9) for d in (25, 26, 27, 28)]
    assert (decision.skip, decision.origin, run_origin(decision, monday)) == (
        [],
        "scheduled",
        "scheduled",
    )
    result = PlanResult(run=decision.run, own=list(decision.own))
    assert origins(result, monday) == ["scheduled"] * 4
    assert due_at(result, monday, ny(2026, 12, 25, 9)) == monday
    assert due_at(result, monday, monday) is None
    # Down from Thursday night to Tuesday: 'latest' runs Tuesday's and skips the four
    # slots of the missed Monday fire time, each with its reason.
    tuesday = ny(2026, 12, 29, 9)
    late = plan_at(tuesday, daily, catchup="latest")
    decision = _decide_for(late, tuesday, thursday, thursday, tuesday, {thursday})
    assert decision.run == [tuesday]
    assert [s for s, _ in decision.skip] == [ny(2026, 12, d, 9) for d in (25, 26, 27, 28)]
    # A fire time before the timing took effect is a backfill of its slots.
    old = plan_at(monday, daily, timing_since=tuesday)
    assert _decide_for(old, monday, None, monday, tuesday, set()).origin == "backfill"
