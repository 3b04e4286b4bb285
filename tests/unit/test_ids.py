"""The workflow id of a slot's run is built in one place (`core.ids`), as Temporal builds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from activities.runtime.models import batch_workflow_id, slot_workflow_id
from core.ids import stamp, workflow_id


def test_a_slot_run_is_named_after_its_job_and_its_utc_second():
    slot = datetime(2027, 3, 14, 3, 0, 0, 250_000, tzinfo=timezone(timedelta(hours=-4)))
    assert stamp(slot) == "2027-03-14T07:00:00Z"
    assert workflow_id("invoice-reminders", slot) == "invoice-reminders-2027-03-14T07:00:00Z"


def test_runtime_runs_carry_the_same_stamp():
    slot = datetime(2027, 3, 14, 7, 0, tzinfo=UTC)
    assert slot_workflow_id(1001, slot) == "rt-1001-2027-03-14T07:00:00Z"
    assert batch_workflow_id(1001, slot).endswith("1001-2027-03-14T07:00:00Z")
