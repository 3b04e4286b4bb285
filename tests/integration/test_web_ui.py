"""The Temporal Web UI, driven in Debian's Chromium by Playwright, says what docs/operating.md
says it does: a schedule's page shows the job's intent; a backfill from its dialog, with
the dialog's defaults, either runs every slot or `check` names each one it dropped, and the
run it started says in its details how many slots the server skipped, and which; a no-op
re-run of a slot is told from work done in the workflow list.

The session's dev server serves the UI (tests/conftest.py); one worker serves the job (the
UI reads a run's details by querying it, which a worker answers). The server works through
a backfill of four slots in one pass: under Skip it starts the first and skips the three
others in the same pass, however fast that run ends, so the outcome does not hang on
timing. A failing run leaves a screenshot of the page in `tmp/artifacts/` (or
`$TEST_ARTIFACTS`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from temporalio.client import ScheduleBackfill, ScheduleOverlapPolicy

from core.ids import workflow_id as slot_workflow_id
from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from tests.helpers import assert_eventually
from tests.helpers.audit import audited
from tests.helpers.browser import CHROMIUM, browser_page, failure_shot
from tests.helpers.worker import schedules_cli
from tests.integration.jobs import end_open_runs
from workflows import JobRunResult

JOB = "ui-hourly-report"
SECOND = timedelta(seconds=1)
CATALOG = f"""\
[{JOB}]
kind = "invoice-reminders"
cron = "0 * * * *"
timezone = "America/New_York"
paused = true
description = "the hourly revenue report"
owner = "finance-ops@example.com"
"""


@pytest.fixture
async def page(temporal, request) -> AsyncIterator[Page]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (Debian package chromium; .ci/run installs it)")
    async with browser_page(
        f"http://127.0.0.1:{temporal.ui_port}", request.node.name, height=1000
    ) as page:
        yield page
        # A failed test is not raised into its fixture: its report marks it instead.
        if getattr(request.node, "call_failed", False):
            await failure_shot(page, request.node.name)


def check(settings, catalog: Path) -> tuple[int, dict]:
    done = schedules_cli(settings, "check", "--json", catalog=catalog)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


async def fill_backfill_range(page: Page, start: datetime, end: datetime) -> None:
    """The dialog's start and end (its end is inclusive), in the UTC it shows."""
    for side, instant in (("start", start), ("end", end)):
        # Typed, not confirmed with Enter: Enter submits the dialog.
        await page.get_by_test_id(f"backfill-{side}-date").fill(instant.strftime("%m/%d/%Y"))
        for part, value in (("hour", instant.hour), ("minute", 0), ("second", 0)):
            await page.get_by_test_id(f"backfill-{side}-{part}").fill(f"{value:02d}")


async def test_the_schedule_page_shows_the_intent_and_a_default_backfill_is_never_silent(
    client, settings, database_url, tmp_path, page, start_workers
):
    catalog = tmp_path / "jobs.toml"
    catalog.write_text(CATALOG)
    jobs = list(load_catalog(catalog, engine=False))
    await sync(client, jobs, settings.temporal_task_queue, prune=False)
    start_workers(1)
    handle = client.get_schedule_handle(JOB)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    slots = [hour - timedelta(hours=n) for n in (4, 3, 2, 1)]
    try:
        await page.goto(f"/namespaces/default/schedules/{JOB}")
        # The intent as the catalog states it: the cron in its own zone, not UTC calendars.
        await page.get_by_text("runs 0 * * * * in America/New_York").wait_for()
        body = await page.inner_text("body")
        assert "the hourly revenue report" in body
        assert "owner finance-ops@example.com" in body

        await page.get_by_role("button", name="Schedule Actions").click()
        await page.get_by_text("Backfill", exact=True).click()
        dialog = page.get_by_role("dialog")
        await dialog.get_by_text("Schedule Backfill").wait_for()
        # The dialog's default overlap policy, left as it is.
        assert await page.locator("#overlap-policy-Skip").is_checked()
        await fill_backfill_range(page, slots[0], slots[-1])
        await dialog.get_by_role("button", name="Schedule", exact=True).click()

        async def all_four_taken_or_skipped():
            info = (await handle.describe()).info
            assert info.num_actions + info.num_actions_skipped_overlap == 4, info
            return info

        info = await assert_eventually(all_four_taken_or_skipped, timeout=60)
        code, report = check(settings, catalog)
        if info.num_actions == 4:
            return  # every slot ran: nothing was dropped
        assert code == 1, report
        (alert,) = [a for a in report["alerts"] if a["kind"] == "backfill_skipped"]
        assert alert["job"] == JOB
        assert alert["message"].startswith(f"{info.num_actions_skipped_overlap} backfilled slot")
        dropped = [s for s in slots if s.strftime("%Y-%m-%d %H:%M:%SZ") in alert["message"]]
        assert len(dropped) == 3 == info.num_actions_skipped_overlap, alert["message"]

        (ran,) = [s for s in slots if s not in dropped]
        await run_details_name_the_skipped(page, client, ran, dropped)
        await a_no_op_rerun_is_told_from_work_done(page, client, handle, ran)
        await audited(client, database_url, settings.temporal_task_queue, jobs, start=slots[0])
    finally:
        await handle.delete()
        await end_open_runs(client, settings.temporal_task_queue, f"{JOB}-")


async def run_details_name_the_skipped(
    page: Page, client, ran: datetime, dropped: list[datetime]
) -> None:
    """The run the backfill started says, in the UI's Current Details, how many slots the
    server skipped and which (read from the server at the run's end)."""
    run = client.get_workflow_handle(slot_workflow_id(JOB, ran), result_type=JobRunResult)
    assert (await run.result()).outcome == "completed"
    await page.goto(f"/namespaces/default/workflows/{run.id}")
    await page.get_by_text("User Metadata", exact=True).click()
    head = f"the server skipped {len(dropped)} slot(s) of the backfill"

    async def the_note() -> str:
        # The UI renders each piece of user metadata as markdown in a frame of its own.
        for frame in page.frames[1:]:
            try:
                text = await frame.inner_text("body", timeout=1000)
            except PlaywrightError:  # a frame the page replaced as it refreshed
                continue
            if head in text:
                return text
        raise AssertionError(f"no frame of the run's page says {head!r}")

    text = await assert_eventually(the_note)
    for slot in dropped:
        assert slot.strftime("%Y-%m-%d %H:%M:%SZ") in text, text
    assert f"python -m schedules backfill {JOB} --start {dropped[0]:%Y-%m-%dT%H:%M:%SZ}" in text


async def a_no_op_rerun_is_told_from_work_done(page: Page, client, handle, ran: datetime) -> None:
    """A second backfill of the slot that ran is a no-op: the workflow list's
    ScheduledJobsOutcome column says so for it, and nothing for the run that did the work."""
    workflow_id = slot_workflow_id(JOB, ran)
    await handle.backfill(
        ScheduleBackfill(
            start_at=ran - SECOND, end_at=ran + SECOND, overlap=ScheduleOverlapPolicy.ALLOW_ALL
        )
    )

    async def rerun_closed():
        runs = [r async for r in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
        assert len(runs) == 2 and all(r.close_time for r in runs), runs
        return runs

    await assert_eventually(rerun_closed, timeout=60)
    await page.goto(f"/namespaces/default/workflows?query={quote(f'WorkflowId = {workflow_id!r}')}")
    await page.get_by_test_id("workflows-summary-table-configuration-button").click()
    await page.get_by_role("button", name="Add ScheduledJobsOutcome column").click()
    await page.keyboard.press("Escape")
    header = page.locator("thead th", has_text="ScheduledJobsOutcome")
    await header.wait_for()
    rows = page.locator("tbody tr")

    async def both_listed():
        texts = [await rows.nth(i).inner_text() for i in range(await rows.count())]
        assert len(texts) == 2, texts
        return texts

    newest, first = await assert_eventually(both_listed)  # newest first
    assert newest.rstrip().endswith("already_completed"), newest
    assert "already_completed" not in first, first
