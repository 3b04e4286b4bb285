"""Naming the slots a backfill's overlap policy dropped (activities/catchup/backfills.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import ScheduleOverlapPolicy
from temporalio.api.schedule.v1 import BackfillRequest as BackfillProto
from temporalio.api.schedule.v1 import SchedulePatch

from activities.catchup.backfills import BackfillRequest, dropped_slots, requests_in
from timing import Timing

HOURLY = Timing(cron="0 * * * *", timezone="UTC")
T0 = datetime(2026, 11, 20, 9, tzinfo=UTC)
SLOTS = [T0 + timedelta(hours=n) for n in range(4)]


def request(overlap: str, requested_at: datetime = T0 + timedelta(days=1)) -> BackfillRequest:
    # Both ends inclusive, as the server reads them (and the Web UI's dialog sends them).
    return BackfillRequest(requested_at, SLOTS[0], SLOTS[-1], overlap)


def test_a_skip_backfill_drops_the_slots_without_a_row_and_names_each():
    dropped = dropped_slots(HOURLY, [request("skip")], [SLOTS[0]], "skip")
    assert [d.fire for d in dropped] == SLOTS[1:]


def test_policies_that_keep_every_slot_drop_none():
    for overlap in ("buffer_all", "allow_all"):
        assert dropped_slots(HOURLY, [request(overlap)], [], "skip") == []


def test_a_backfill_without_a_policy_takes_the_schedules():
    assert len(dropped_slots(HOURLY, [request("")], [], "skip")) == 4
    assert dropped_slots(HOURLY, [request("")], [], "buffer_all") == []


def test_backfills_requested_before_since_are_left_out():
    old = request("skip", requested_at=T0)
    assert dropped_slots(HOURLY, [old], [], "skip", since=T0 + timedelta(hours=1)) == []


def test_the_servers_patch_reads_as_requests():
    start, end = Timestamp(), Timestamp()
    start.FromDatetime(SLOTS[0])
    end.FromDatetime(SLOTS[-1])
    patch = SchedulePatch(
        backfill_request=[
            BackfillProto(
                start_time=start,
                end_time=end,
                overlap_policy=ScheduleOverlapPolicy.SCHEDULE_OVERLAP_POLICY_SKIP,
            )
        ]
    )
    (found,) = requests_in(T0, patch)
    assert (found.start, found.end, found.overlap) == (SLOTS[0], SLOTS[-1], "skip")
