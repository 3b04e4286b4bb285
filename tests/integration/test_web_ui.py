"""The Temporal Web UI, driven in Debian's Chromium by Playwright, says what docs/operating.md
says it does: a schedule's page shows the job's intent, and a backfill from its dialog, with
the dialog's defaults, either runs every slot or `check` names each one it dropped.

The session's dev server serves the UI (tests/conftest.py). No worker polls the job's
queue, so the first backfilled run stays open while the server reaches the next slots: the
outcome does not hang on timing. A failing run leaves a screenshot of the page in
`tmp/artifacts/` (or `$TEST_ARTIFACTS`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from tests.helpers import ROOT, assert_eventually
from tests.helpers.worker import settings_env

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Headless as root, and nothing reaching out to the network this machine does not have.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", ROOT / "tmp" / "artifacts"))
JOB = "ui-hourly-report"
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
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
        )
        context = await browser.new_context(
            base_url=f"http://127.0.0.1:{temporal.ui_port}",
            timezone_id="UTC",
            viewport={"width": 1400, "height": 1000},
        )
        page = await context.new_page()
        try:
            yield page
        finally:
            if getattr(request.node, "call_failed", False):
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=ARTIFACTS / f"{request.node.name}.png", full_page=True)
            await browser.close()


def check(settings, catalog: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "schedules", "--catalog", str(catalog), "check", "--json"],
        cwd=ROOT,
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    client, settings, tmp_path, page
):
    catalog = tmp_path / "jobs.toml"
    catalog.write_text(CATALOG)
    await sync(client, list(load_catalog(catalog)), settings.temporal_task_queue, prune=False)
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
        named = [s for s in slots if s.strftime("%Y-%m-%d %H:%M:%SZ") in alert["message"]]
        assert len(named) == 3 == info.num_actions_skipped_overlap, alert["message"]
    finally:
        await handle.delete()
        async for run in client.list_workflows(
            f"WorkflowId STARTS_WITH '{JOB}-' "
            f"AND TaskQueue = '{settings.temporal_task_queue}' AND ExecutionStatus = 'Running'"
        ):
            await client.get_workflow_handle(run.id, run_id=run.run_id).terminate("test over")
