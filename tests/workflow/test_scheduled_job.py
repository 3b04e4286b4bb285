"""Every branch of `ScheduledJobWorkflow.run` on stand-in activities: what the plan says
(on time, catch-up slots run and skipped, nothing yet), how each claim comes back (claimed,
already completed, skipped by the starting deadline), how the work ends (completed, done by
another run, superseded, failed), and the new attempt series after a frozen worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.catchup.missed import PlanResult
from activities.common.models import STALE_ATTEMPT, WorkResult
from tests.workflow.runs import SLOT, job, run_to_end
from tests.workflow.stand_ins import WORK, StandIns
from workflows import (
    ChunkedJobWorkflow,
    LocalTransactionJobWorkflow,
    OneTransactionJobWorkflow,
    RetrySettings,
    ScheduledJobWorkflow,
    workflow_for,
)

HOUR = timedelta(hours=1)


async def test_an_on_time_run_claims_its_slot_in_begin_and_does_the_work(workflow_env):
    stand_ins = StandIns()
    result = await run_to_end(workflow_env, stand_ins, job())
    assert (result.outcome, result.counts, result.scheduled_at) == ("completed", {"sent": 3}, SLOT)
    assert result.origin == "scheduled"
    assert result.caught_up == [] and result.missed_skipped == 0
    # One begin (plan and claim together), then the work: no claim of its own.
    assert stand_ins.names() == ["begin_run", "claim", WORK]
    (begin,) = stand_ins.of("begin_run")
    assert begin.plan.scheduled_at == SLOT and begin.claim.origin == "scheduled"


async def test_a_run_without_a_schedule_is_direct_and_plans_nothing(workflow_env):
    stand_ins = StandIns()
    result = await run_to_end(workflow_env, stand_ins, job(), slot=None)
    assert (result.outcome, result.origin) == ("completed", "direct")
    (begin,) = stand_ins.of("begin_run")
    assert begin.plan is None and begin.claim.origin == "direct"
    assert result.scheduled_at == begin.claim.scheduled_at  # its own start time, to the second
    assert result.scheduled_at.microsecond == 0


async def test_catch_up_runs_missed_slots_oldest_first_and_counts_the_skipped(workflow_env):
    missed = [SLOT - 2 * HOUR, SLOT - HOUR]
    plan = PlanResult(run=[*missed, SLOT], skipped=4, gap=2, origin="catch-up")
    stand_ins = StandIns(plan=plan, settled={missed[1]: ("skipped", "missed starting deadline")})
    result = await run_to_end(workflow_env, stand_ins, job())
    assert result.outcome == "completed" and result.origin == "catch-up"
    assert [(c.scheduled_at, c.outcome) for c in result.caught_up] == [
        (missed[0], "completed"),
        (missed[1], "skipped"),
    ]
    assert result.caught_up[1].reason == "missed starting deadline"
    assert (result.missed_skipped, result.catchup_gap) == (4, 2)
    # begin claims the oldest; each other slot is claimed before its work, with its origin.
    claims = [(c.scheduled_at, c.origin) for c in stand_ins.of("claim")]
    assert claims == [(missed[0], "catch-up"), (missed[1], "catch-up"), (SLOT, "catch-up")]
    assert stand_ins.names().count(WORK) == 2  # the skipped slot does no work


async def test_a_late_run_that_runs_only_the_latest_missed_slot_skips_its_own(workflow_env):
    latest = SLOT + HOUR
    plan = PlanResult(run=[latest], skipped=1, origin="catch-up", reason="missed: latest")
    stand_ins = StandIns(plan=plan)
    result = await run_to_end(workflow_env, stand_ins, job())
    assert (result.outcome, result.reason, result.execution_id) == (
        "skipped",
        "missed: latest",
        None,
    )
    assert [(c.scheduled_at, c.outcome) for c in result.caught_up] == [(latest, "completed")]


async def test_a_plan_that_runs_nothing_ends_skipped_with_its_reason(workflow_env):
    plan = PlanResult(run=[], origin="backfill", reason="not run: slot is after this run started")
    stand_ins = StandIns(plan=plan)
    result = await run_to_end(workflow_env, stand_ins, job())
    assert (result.outcome, result.origin) == ("skipped", "backfill")
    assert result.reason.startswith("not run")
    assert stand_ins.names() == ["begin_run"]


async def test_a_slot_completed_before_is_a_no_op(workflow_env):
    stand_ins = StandIns(settled={SLOT: ("completed", "already completed at 02:31")})
    result = await run_to_end(workflow_env, stand_ins, job())
    assert (result.outcome, result.reason) == ("already_completed", "already completed at 02:31")
    assert WORK not in stand_ins.names()


async def test_work_that_finds_the_slot_done_by_another_run_says_so(workflow_env):
    done = WorkResult(counts={"sent": 0}, already_completed=True)
    stand_ins = StandIns(work_does=lambda _: done)
    result = await run_to_end(workflow_env, stand_ins, job())
    assert (result.outcome, result.reason) == (
        "already_completed",
        "another run completed this slot",
    )


async def test_a_run_past_its_starting_deadline_is_skipped_without_work(workflow_env):
    stand_ins = StandIns(
        settled={SLOT: ("skipped", "missed starting deadline: started 900s after")}
    )
    result = await run_to_end(workflow_env, stand_ins, job(starting_deadline_seconds=60))
    assert result.outcome == "skipped" and result.reason.startswith("missed starting deadline")
    assert stand_ins.of("begin_run")[0].claim.starting_deadline_seconds == 60
    assert WORK not in stand_ins.names()


def _stale(_):
    raise ApplicationError("attempt 2 holds the slot", type=STALE_ATTEMPT, non_retryable=True)


async def test_a_stale_attempt_ends_the_run_superseded_and_records_no_failure(workflow_env):
    stand_ins = StandIns(work_does=_stale)
    result = await run_to_end(workflow_env, stand_ins, job())
    assert result.outcome == "superseded"
    assert result.reason == "StaleAttempt: attempt 2 holds the slot"  # the error, as raised
    assert "record_failure" not in stand_ins.names()


def _broken(_):
    raise ApplicationError("the mail server refused", non_retryable=True)


async def test_failed_work_is_recorded_and_fails_the_run(workflow_env):
    stand_ins = StandIns(work_does=_broken)
    with pytest.raises(WorkflowFailureError) as failed:
        await run_to_end(workflow_env, stand_ins, job())
    assert "stand-in-job at 2026-11-30T02:30:00+00:00 failed: the mail server refused" in str(
        failed.value.cause
    )
    (failure,) = stand_ins.of("record_failure")
    assert failure.error == "the mail server refused"
    assert failure.execution_id == 1  # the slot's execution, claimed by begin_run


def _timing_out_job():
    # One attempt per series, timed out by the server after 1 s (start-to-close).
    return job(
        start_to_close_seconds=1,
        heartbeat_seconds=None,
        retry=RetrySettings(initial_interval_seconds=0.1, maximum_attempts=1),
    )


async def test_retries_absorbed_by_a_frozen_worker_start_a_new_attempt_series(workflow_env):
    stand_ins = StandIns(hang_first_series=True, took_over=False)
    result = await run_to_end(workflow_env, stand_ins, _timing_out_job())
    assert result.outcome == "completed"
    series = stand_ins.of(WORK)  # the activity id of each series' attempt
    assert len(series) >= 2 and len(set(series)) == len(series)
    asked = stand_ins.of("attempt_took_over")
    assert len(asked) == len(series) - 1
    assert (asked[0].activity_seq, asked[0].attempt) == (int(series[0]), 1)


async def test_a_series_whose_last_attempt_took_over_and_timed_out_fails(workflow_env):
    stand_ins = StandIns(hang_first_series=True, took_over=True)
    with pytest.raises(WorkflowFailureError):
        await run_to_end(workflow_env, stand_ins, _timing_out_job())
    assert len(stand_ins.of(WORK)) == 1 and len(stand_ins.of("attempt_took_over")) == 1
    assert len(stand_ins.of("record_failure")) == 1


# A kind whose slot work fits in one transaction (`JobRun.one_transaction`): the work
# activity begins the run (`activities.run.begin.begin_and_work`), no begin_run. Both types that
# do: the one sync starts (the work a local activity), and the one of runs that schedules
# synced before v7 start (the work through the server).
ONE_TRANSACTION_TYPES = pytest.mark.parametrize(
    "one_tx",
    [LocalTransactionJobWorkflow.run, OneTransactionJobWorkflow.run],
    ids=["local", "through-the-server"],
)


@ONE_TRANSACTION_TYPES
async def test_a_one_transaction_run_begins_in_its_work_activity(workflow_env, one_tx):
    stand_ins = StandIns()
    result = await run_to_end(workflow_env, stand_ins, job(one_transaction=True), workflow=one_tx)
    assert (result.outcome, result.counts, result.origin) == ("completed", {"sent": 3}, "scheduled")
    assert stand_ins.names() == [WORK, "begin_in_work", "claim"]
    (begin,) = stand_ins.of("begin_in_work")
    assert begin.plan.scheduled_at == SLOT and begin.claim.origin == "scheduled"


@ONE_TRANSACTION_TYPES
async def test_a_one_transaction_run_catches_up_from_its_work_activity(workflow_env, one_tx):
    missed = SLOT - HOUR
    plan = PlanResult(run=[missed, SLOT], skipped=2, origin="catch-up")
    stand_ins = StandIns(
        plan=plan, settled={SLOT: ("completed", "this slot was already completed")}
    )
    result = await run_to_end(workflow_env, stand_ins, job(one_transaction=True), workflow=one_tx)
    # The oldest slot is claimed and worked by the activity that began the run; the own slot
    # is claimed after it (here: found completed, a no-op).
    assert [(c.scheduled_at, c.outcome) for c in result.caught_up] == [(missed, "completed")]
    assert (result.outcome, result.missed_skipped) == ("already_completed", 2)
    assert stand_ins.names() == [WORK, "begin_in_work", "claim", "claim_execution", "claim"]


@ONE_TRANSACTION_TYPES
async def test_a_one_transaction_run_declined_begins_with_begin_run(workflow_env, one_tx):
    stand_ins = StandIns(
        declines=True, settled={SLOT: ("completed", "this slot was already completed")}
    )
    result = await run_to_end(workflow_env, stand_ins, job(one_transaction=True), workflow=one_tx)
    assert (result.outcome, result.reason) == (
        "already_completed",
        "this slot was already completed",
    )
    assert stand_ins.names() == [WORK, "begin_in_work", "begin_run", "claim"]


@ONE_TRANSACTION_TYPES
async def test_a_one_transaction_run_whose_work_fails_records_its_claim_and_failure(
    workflow_env, one_tx
):
    stand_ins = StandIns(work_does=_broken)
    with pytest.raises(WorkflowFailureError) as failed:
        await run_to_end(workflow_env, stand_ins, job(one_transaction=True), workflow=one_tx)
    assert "failed: the mail server refused" in str(failed.value.cause)
    # The work's attempts committed nothing: begin_run records the plan and the claim.
    assert stand_ins.names()[-3:] == ["begin_run", "claim", "record_failure"]
    (failure,) = stand_ins.of("record_failure")
    assert failure.error == "the mail server refused"


# A kind that works in chunks (`JobRun.chunked`): its run (`ChunkedJobWorkflow`) begins in
# the work activity too, a local activity that does the first chunk in the claim's
# transaction. A `LocalTransactionJobWorkflow` given such a job begins with begin_run.
async def test_a_chunked_run_whose_work_ends_in_its_first_chunk_is_one_local_activity(
    workflow_env,
):
    stand_ins = StandIns()
    run = job(chunked=True)
    assert workflow_for(run) == ChunkedJobWorkflow.run  # what sync starts
    result = await run_to_end(workflow_env, stand_ins, run)
    assert (result.outcome, result.counts) == ("completed", {"sent": 3})
    assert stand_ins.names() == [WORK, "begin_in_work", "claim"]
    assert stand_ins.work_local == [True], "the first chunk runs in the workflow task"


async def test_a_chunked_run_with_more_work_goes_on_in_its_work_activity(workflow_env):
    stand_ins = StandIns(more=True)
    run = job(chunked=True)
    result = await run_to_end(workflow_env, stand_ins, run)
    # The first chunk committed with the claim; the work activity, through the server (it
    # heartbeats), resumes from the saved progress and completes the slot.
    assert (result.outcome, result.counts) == ("completed", {"sent": 3})
    assert stand_ins.names() == [WORK, "begin_in_work", "claim", WORK]
    assert stand_ins.work_local == [True, False]


async def test_a_chunked_run_of_another_type_begins_with_begin_run(workflow_env):
    stand_ins = StandIns()
    run = job(chunked=True)
    result = await run_to_end(workflow_env, stand_ins, run, workflow=ScheduledJobWorkflow.run)
    assert result.outcome == "completed"
    assert stand_ins.names() == ["begin_run", "claim", WORK]
    stand_ins = StandIns()
    await run_to_end(workflow_env, stand_ins, run, workflow=LocalTransactionJobWorkflow.run)
    assert stand_ins.names() == ["begin_run", "claim", WORK]


async def test_a_one_transaction_run_starts_a_new_series_without_asking(workflow_env):
    stand_ins = StandIns(hang_first_series=True)
    run = _timing_out_job().model_copy(update={"one_transaction": True})
    result = await run_to_end(workflow_env, stand_ins, run, workflow=OneTransactionJobWorkflow.run)
    assert result.outcome == "completed"
    assert len(stand_ins.of(WORK)) == 2 and stand_ins.of("attempt_took_over") == []


async def test_a_local_one_transaction_run_whose_work_hangs_fails_and_records_it(workflow_env):
    # A local attempt that timed out ran, in the worker running the workflow task: no
    # retries a frozen worker absorbed, no new series; the failure is recorded.
    stand_ins = StandIns(hang_first_series=True)
    run = _timing_out_job().model_copy(update={"one_transaction": True})
    with pytest.raises(WorkflowFailureError) as failed:
        await run_to_end(workflow_env, stand_ins, run, workflow=LocalTransactionJobWorkflow.run)
    assert "failed: " in str(failed.value.cause) and "timed out" in str(failed.value.cause)
    assert len(stand_ins.of(WORK)) == 1 and stand_ins.of("attempt_took_over") == []
    assert stand_ins.names()[-3:] == ["begin_run", "claim", "record_failure"]
