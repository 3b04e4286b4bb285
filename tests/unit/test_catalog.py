"""Catalog validation and compilation, without servers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError
from temporalio.client import ScheduleOverlapPolicy

from schedules.catalog import CATALOG, INVOICE_REMINDERS, JobSpec
from schedules.compile import compile_schedule, job_run
from schedules.sync import check_unique
from worker.errors import CatalogError


def spec(**overrides) -> dict:
    return INVOICE_REMINDERS.model_dump() | overrides


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cron", "61 2 * * *", "not a valid cron expression: '61 2 * * *'"),
        ("timezone", "Europe/Londn", "not a known IANA time zone: 'Europe/Londn'"),
        ("id", "Invoice_Reminders", "must be kebab-case"),
        ("catchup_window", timedelta(seconds=5), "at least 10 seconds"),
    ],
)
def test_invalid_fields_are_named_with_their_value(field, value, message):
    with pytest.raises(ValidationError) as err:
        JobSpec.model_validate(spec(**{field: value}))
    assert field in str(err.value) and message in str(err.value)


def test_time_zone_is_required():
    fields = spec()
    del fields["timezone"]
    with pytest.raises(ValidationError, match="timezone"):
        JobSpec.model_validate(fields)


def test_duplicate_job_ids_are_refused():
    with pytest.raises(CatalogError, match="'invoice-reminders' is declared twice"):
        check_unique([INVOICE_REMINDERS, INVOICE_REMINDERS])


def test_invoice_reminders_compiles_to_a_skip_schedule_in_london():
    schedule = compile_schedule(INVOICE_REMINDERS, "q")
    assert schedule.spec.cron_expressions == ["30 2 * * *"]
    assert schedule.spec.time_zone_name == "Europe/London"
    assert schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert schedule.policy.catchup_window == INVOICE_REMINDERS.catchup_window
    assert schedule.action.id == "invoice-reminders"
    assert schedule.action.task_queue == "q"
    run = job_run(INVOICE_REMINDERS)
    assert run.activity == "send_invoice_reminders"
    assert run.heartbeat_seconds == 60
    assert INVOICE_REMINDERS in CATALOG
