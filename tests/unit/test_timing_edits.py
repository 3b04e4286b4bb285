"""The slots an edit of a timing strands (`timing.edits.stranded`) and what the edit decides
for them by the catch-up policy (`schedules.edits.decide`): pure, the clock a parameter."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from schedules.edits import decide
from timing import Timing
from timing.business import BusinessCalendar, CalendarRule
from timing.edits import Strand, stranded

NEW_YORK = ZoneInfo("America/New_York")


def at9(day: int) -> datetime:
    return datetime(2026, 11, day, 9, tzinfo=NEW_YORK).astimezone(UTC)


def weekdays(on_holiday: str = "following", *holidays: date) -> Timing:
    calendar = BusinessCalendar(name="exchange", base="NYSE", extra_holidays=holidays)
    rule = CalendarRule(calendar=calendar, on_holiday=on_holiday)
    return Timing(cron="0 9 * * 1-5", timezone="America/New_York", calendar=rule)


HOLIDAYS = weekdays("following", date(2026, 11, 19), date(2026, 11, 20))
EDIT = at9(20) + timedelta(hours=1)  # Friday 10:00


def test_removing_the_holidays_strands_the_slots_moved_past_the_edit():
    assert stranded(HOLIDAYS, weekdays(), EDIT) == [
        Strand(at9(19), at9(23), at9(19)),
        Strand(at9(20), at9(23), at9(20)),
    ]


def test_an_edit_before_the_slots_or_after_their_run_strands_nothing():
    assert stranded(HOLIDAYS, weekdays(), at9(19) - timedelta(hours=1)) == []
    assert stranded(HOLIDAYS, weekdays(), at9(23) + timedelta(hours=1)) == []
    assert stranded(HOLIDAYS, HOLIDAYS, EDIT) == []
    plain = Timing(cron="0 9 * * 1-5", timezone="America/New_York")
    assert stranded(plain, plain.model_copy(update={"cron": "0 8 * * 1-5"}), EDIT) == []


def test_a_past_slot_the_new_timing_skips_is_stranded_a_future_one_is_not():
    skip = weekdays("skip", date(2026, 11, 19), date(2026, 11, 20))
    assert stranded(HOLIDAYS, skip, EDIT) == [
        Strand(at9(19), at9(23), None),
        Strand(at9(20), at9(23), None),
    ]
    # Monday closed as well, `skip`: Monday is the edit's own choice, not stranded.
    assert stranded(
        HOLIDAYS, weekdays("skip", date(2026, 11, 19), date(2026, 11, 20), date(2026, 11, 23)),
        EDIT,
    ) == [Strand(at9(19), at9(23), None), Strand(at9(20), at9(23), None)]  # fmt: skip


def test_preceding_strands_a_future_slot_moved_before_the_edit():
    # Friday 10:00, Monday 23 made a holiday, `preceding`: Monday's run is due Friday 09:00.
    before = weekdays("preceding")
    after = weekdays("preceding", date(2026, 11, 23))
    assert stranded(before, after, EDIT) == [Strand(at9(23), at9(23), at9(20))]


def test_the_catchup_policy_decides_which_run():
    strands = stranded(HOLIDAYS, weekdays(), EDIT)
    assert [d.outcome for d in decide(strands, "all", 5)] == ["run", "run"]
    assert [d.outcome for d in decide(strands, "all", 1)] == ["dropped", "run"]
    assert [d.outcome for d in decide(strands, "latest", None)] == ["dropped", "run"]
    skipped = decide(strands, "skip", None)
    assert [d.outcome for d in skipped] == ["dropped", "dropped"]
    assert skipped[0].reason == (
        "the new timing has it due 2026-11-19T14:00:00Z, before the edit; "
        "catch-up skip runs no missed time"
    )
    never = decide([Strand(at9(19), at9(23), None)], "all", 5)
    assert [(d.outcome, d.reason) for d in never] == [("dropped", "the new timing does not run it")]


def test_a_slot_sharing_a_kept_fire_time_runs_with_it():
    shared = [Strand(at9(19), at9(23), at9(20)), Strand(at9(20), at9(23), at9(20))]
    assert [d.outcome for d in decide(shared, "latest", None)] == ["run", "run"]
