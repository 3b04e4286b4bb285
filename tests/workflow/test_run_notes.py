"""A run's notes from the server (`workflows.run_notes`) on stand-in activities: a late run
asks what the server skipped of its backfill and its details say it; a run that did no work
marks itself with `ScheduledJobsOutcome` once the namespace has it; an on-time run that did
work asks nothing. The real activities against the dev server: tests/integration/
test_backfill_skipped.py and test_web_ui.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from activities.catchup.backfills import BackfillSkips
from activities.catchup.run_notes import OUTCOME_ATTRIBUTE
from tests.workflow.runs import SLOT, job, stand_in_worker, start
from tests.workflow.stand_ins import WORK, StandIns

HOUR = timedelta(hours=1)
# SLOT lies days before the test runs: its run starts late, as a backfill's does.
SKIPS = BackfillSkips(
    start=SLOT,
    end=SLOT + 3 * HOUR,
    overlap="skip",
    skipped=[SLOT + n * HOUR for n in (1, 2, 3)],
    counted=3,
    checked=4,
    slots=4,
)


async def run(workflow_env, stand_ins: StandIns, slot: datetime = SLOT):
    """Run to its end; its result, its details and its search attribute."""
    async with stand_in_worker(workflow_env, stand_ins) as task_queue:
        handle = await start(workflow_env, task_queue, job(), slot)
        result = await handle.result()
        metadata = await handle.query("__temporal_workflow_metadata")
        marked = (await handle.describe()).typed_search_attributes.get(OUTCOME_ATTRIBUTE)
    return result, metadata.current_details, marked


async def test_a_late_run_says_which_slots_the_server_skipped_of_its_backfill(workflow_env):
    stand_ins = StandIns(skips=SKIPS)
    result, details, marked = await run(workflow_env, stand_ins)
    assert result.outcome == "completed" and marked is None
    ((name, ask),) = stand_ins.notes
    assert name == "backfill_skips"
    assert (ask.job_name, ask.scheduled_at, ask.timing) == ("stand-in-job", SLOT, job().timing)
    assert ask.started_at > SLOT
    assert (
        "the server skipped 3 slot(s) of the backfill over this run (2026-11-30 02:30:00Z to "
        "2026-11-30 05:30:00Z, overlap skip): 2026-11-30 03:30:00Z, 2026-11-30 04:30:00Z, "
        "2026-11-30 05:30:00Z (its count of slots of this job skipped by overlap: 3)"
    ) in details
    assert (
        "`python -m schedules backfill stand-in-job --start 2026-11-30T03:30:00Z "
        "--end 2026-11-30T05:30:01Z`" in details
    )


async def test_a_late_run_whose_backfill_lost_nothing_says_nothing_of_it(workflow_env):
    stand_ins = StandIns(skips=None)
    result, details, _ = await run(workflow_env, stand_ins)
    assert result.outcome == "completed" and [n for n, _ in stand_ins.notes] == ["backfill_skips"]
    assert "skipped" not in details


async def test_a_server_that_cannot_answer_leaves_the_note_unsaid_not_the_run_failed(
    workflow_env,
):
    stand_ins = StandIns(skips=SKIPS, skips_fail=True)
    result, details, _ = await run(workflow_env, stand_ins)
    assert result.outcome == "completed" and "the server skipped" not in details


async def test_an_on_time_run_that_did_work_asks_the_server_nothing(workflow_env):
    # A slot after the run's start: not late, whatever the machine's load.
    slot = datetime.now(UTC).replace(microsecond=0) + HOUR
    stand_ins = StandIns(skips=SKIPS)
    result, _, marked = await run(workflow_env, stand_ins, slot)
    assert result.outcome == "completed" and marked is None
    assert stand_ins.notes == [] and WORK in stand_ins.names()


async def test_a_no_op_run_is_marked_with_its_outcome(workflow_env):
    stand_ins = StandIns(settled={SLOT: ("completed", "already completed at 02:31")})
    result, _, marked = await run(workflow_env, stand_ins)
    assert result.outcome == "already_completed"
    assert marked == "already_completed"
    assert [n for n, _ in stand_ins.notes] == ["backfill_skips", "outcome_attribute"]


async def test_a_no_op_run_is_not_marked_where_the_namespace_lacks_the_attribute(workflow_env):
    stand_ins = StandIns(
        settled={SLOT: ("skipped", "missed starting deadline")}, outcome_registered=False
    )
    result, _, marked = await run(workflow_env, stand_ins)
    assert result.outcome == "skipped" and marked is None
    assert ("outcome_attribute", None) in stand_ins.notes
