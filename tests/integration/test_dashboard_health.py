"""The dashboard's health page (api/pages/health.py), in Debian's Chromium: `check`'s
findings now and the newest audit report `python -m schedules audit` recorded, each
finding linking to its schedule's page and its slot's `explain`; a tenant's key opens no
page. The walk saves docs/images/dashboard-health.png (docs/dashboard.md shows it).

The finding is the test's own: a runtime schedule created an hour ago while no dispatcher
ran (the test starts none), so its slots since are lost (the audit) and its next slot is
long overdue (the check's missed_runs).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from api.settings import ApiSettings
from schedules import tenants
from tests.helpers.api import serving
from tests.helpers.browser import browser_page
from tests.helpers.worker import schedules_cli
from tests.integration.runtime import fresh_ids
from tests.integration.test_dashboard import clock, log_in, shot

pytestmark = pytest.mark.timeout(240)

EXPORT = {"tenant": "acme", "name": "nightly-export", "kind": "test-noop",
          "cron": "*/10 * * * *", "timezone": "Europe/Paris"}  # fmt: skip


async def test_the_health_page_links_each_finding_to_its_schedule_and_slot(
    db, database_url, settings, temporal, request
):
    fresh_ids(db)
    created = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=1)
    made = await tenants.create(database_url, EXPORT, by="ops:alice", clock=clock(created))
    job = made.schedule.ledger_name
    audit = schedules_cli(
        settings, "audit", "--from", "2h", "--settle", "0s", "--pages-per-second", "500", "--json"
    )
    assert audit.returncode == 1, audit.stdout + audit.stderr
    *found, _ = [json.loads(line) for line in audit.stdout.splitlines()]
    lost = [f["slot"]["utc"] for f in found if (f["kind"], f["job"]) == ("lost", job)]
    assert len(lost) >= 5, found  # every 10 minutes for an hour, none run

    ui = f"http://127.0.0.1:{temporal.ui_port}"
    api_settings = ApiSettings(
        database_url=database_url, temporal_address=temporal.address, temporal_ui_url=ui
    )
    async with serving(api_settings) as api, browser_page(api.url, request.node.name) as page:
        await log_in(page, await api.key(None))
        await page.wait_for_url("**/ui/schedules")
        await page.click("header a:has-text('Health')")
        await page.wait_for_url("**/ui/health")
        # The check, now: the schedule's overdue slot, the schedule named as an example.
        missed = page.locator("#alerts tr", has_text="missed_runs")
        assert "runtime:test-noop" in await missed.inner_text()
        assert await missed.get_by_role("link", name=job, exact=True).count() == 1
        # The audit recorded: every lost slot, each linked to its explain.
        status = await page.inner_text("#audit-status")
        assert "findings" in status and "by schedules audit" in status, status
        rows = page.locator("#findings tr", has_text=job).filter(has_text="lost")
        assert await rows.count() == len(lost)
        await shot(page, "health")
        await rows.nth(0).get_by_role("link", name=lost[0], exact=True).click()
        await page.wait_for_url(f"**/ui/schedules/{made.schedule.id}?slot=*")
        verdict = await page.inner_text("#verdict")
        assert f"({lost[0]}): due, not dispatched" in verdict, verdict
        await page.go_back()
        await rows.nth(0).get_by_role("link", name=job, exact=True).click()
        await page.wait_for_url(f"**/ui/schedules/{made.schedule.id}")
        assert "acme / nightly-export" in await page.inner_text("h1")

        # A tenant's key opens no page: as a bearer, and at the login form.
        tenant_key = await api.key("acme")
        with httpx.Client(base_url=api.url, timeout=30) as web:
            web.headers["Authorization"] = f"Bearer {tenant_key}"
            answer = web.get("/ui/health")
            assert (answer.status_code, answer.headers["location"]) == (303, "/ui/login")
            web.get("/ui/login")
            form = {"key": tenant_key, "csrf": web.cookies["sj_login"]}
            assert web.post("/ui/login", data=form).status_code == 401
            assert web.get("/ui/health").status_code == 303


async def test_without_temporal_the_page_says_so_and_shows_the_rest(database_url):
    """Temporal away: the check's status is unknown with one line naming the server, and
    the page still answers (here: no audit recorded yet)."""
    away = ApiSettings(database_url=database_url, temporal_address="127.0.0.1:1")
    async with serving(away) as api:
        with httpx.Client(base_url=api.url, timeout=60) as web:
            web.get("/ui/login")
            form = {"key": await api.key(None), "csrf": web.cookies["sj_login"]}
            assert web.post("/ui/login", data=form).status_code == 303
            page = web.get("/ui/health")
    assert page.status_code == 200, page.text
    assert "Status <strong>unknown</strong>" in page.text
    assert "cannot reach Temporal at 127.0.0.1:1" in page.text
    assert "No audit recorded yet" in page.text and "Traceback" not in page.text
