"""The operator's dashboard (api/pages), walked in Debian's Chromium by Playwright as an
operator would: log in with an operator key, see a catalog job beside the runtime
schedules and filter by source, pause and resume the catalog job with a note; find a
tenant's paused schedule by filter, read its next fire times across a DST change, explain
a slot that did not run, resume it; backfill a past range whose preview lists N slots and
see exactly those N run (counted in `job_executions`), the audit clean. The walk saves a screenshot of each page to
docs/images/ (docs/dashboard.md shows them), so they stay current.

Without a browser: a tenant's key opens no page, each form posted without its CSRF token
is refused with nothing written, and a reverse proxy's identity header is believed from
the trusted proxy's address only.

The dispatcher is the test's (`tests/integration/runtime.py`): it ticks when the test
says, so no schedule fires on its own; both schedules of the walk are paused from their
creation, so only the backfill's slots run.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page

from api.settings import ApiSettings
from devstack.ports import free_port
from schedules import tenants
from schedules.catalog.model import load_catalog
from schedules.sync.apply import sync
from tests.helpers import ROOT, assert_eventually
from tests.helpers.api import LiveApi, serving
from tests.helpers.browser import CHROMIUM, browser_page
from tests.integration.runtime import audit_clean, dispatcher, fresh_ids, settled, tick_all

pytestmark = pytest.mark.timeout(240)

IMAGES = ROOT / "docs" / "images"
_NOW = datetime.now(UTC)
T0 = _NOW.replace(minute=_NOW.minute // 10 * 10, second=0, microsecond=0) - timedelta(hours=2)
LATE = timedelta(days=1)  # the backfill's runs start two hours after their slots
YEAR_AGO = _NOW - timedelta(days=400)
# 02:30 on March 8 to 14 in New York: the second Sunday of March, the spring-forward day,
# is always one of them, so the next fire times always cross a DST change.
MARCH = {"tenant": "acme", "name": "march-close", "kind": "test-noop", "cron": "30 2 8-14 3 *",
         "timezone": "America/New_York"}  # fmt: skip
TEN_MINUTELY = {"tenant": "acme", "name": "ten-minutely", "kind": "test-noop",
                "cron": "*/10 * * * *", "timezone": "UTC"}  # fmt: skip
OTHER = {"tenant": "globex", "name": "yearly", "kind": "test-noop", "cron": "0 3 1 1 *",
         "timezone": "UTC"}  # fmt: skip
N = 4  # the backfill's slots: T0, T0+10m, T0+20m, T0+30m


def clock(instant: datetime):
    return lambda: instant


async def paused(database_url: str, data: dict, note: str, at: datetime) -> int:
    """A schedule created paused at `at` by ops:alice."""
    data = data | {"paused": True, "note": note}
    made = await tenants.create(database_url, data, by="ops:alice", clock=clock(at))
    return made.schedule.id


async def shot(page: Page, name: str) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=IMAGES / f"dashboard-{name}.png", full_page=True)


async def log_in(page: Page, key: str) -> None:
    await page.goto("/ui/login")
    await page.fill("input[name=key]", key)
    await page.click("button:has-text('Log in')")


@pytest.fixture
async def catalog_job(client, task_queue, tmp_path):
    """A catalog of one job (yearly: it does not fire during the test), synced to Temporal;
    its schedule is deleted afterwards."""
    job_id = f"dash-close-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "jobs.toml"
    path.write_text(
        f'[{job_id}]\ndescription = "Close the books"\nowner = "finance"\n'
        'kind = "invoice-reminders"\ncron = "0 3 1 1 *"\ntimezone = "Europe/London"\n'
    )
    await sync(client, list(load_catalog(path, engine=False)), task_queue, prune=False)
    yield job_id, path
    await client.get_schedule_handle(job_id).delete()


async def test_an_operator_walks_every_page(
    db, database_url, client, temporal, task_queue, start_workers, catalog_job, request
):
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium not installed (Debian package chromium; .ci/run installs it)")
    start_workers(1)
    fresh_ids(db)
    job_id, catalog_path = catalog_job
    settings = ApiSettings(
        database_url=database_url,
        temporal_address=temporal.address,
        temporal_task_queue=task_queue,
        schedules_catalog=catalog_path,
    )
    march_id = await paused(database_url, MARCH, "ledger migration", YEAR_AGO)
    ten_id = await paused(database_url, TEN_MINUTELY, "by hand only", T0 - timedelta(minutes=5))
    await tenants.create(database_url, OTHER, by="ops:bob")
    async with serving(settings) as api, browser_page(api.url, request.node.name) as page:
        key = await api.key(None)
        await page.goto("/ui/schedules")
        assert page.url.endswith("/ui/login")  # no session: the login form
        await shot(page, "login")
        await log_in(page, key)
        await page.wait_for_url("**/ui/schedules")
        await walk_catalog_job(page, job_id)
        await walk_schedule(page, march_id)
        await walk_backfill(page, db, database_url, client, task_queue, ten_id)
    await audit_clean(database_url, client, task_queue, T0 - timedelta(minutes=10),
                      datetime.now(UTC), late=LATE)  # fmt: skip


async def walk_catalog_job(page: Page, job_id: str) -> None:
    """The list shows the catalog job beside the runtime schedules; the source filter
    keeps one or the other; the job's page pauses it with a note (the list then finds it
    by state, with its note) and resumes it."""
    job_row = page.locator(f"#schedules tr[data-job='{job_id}']")
    runtime_rows = page.locator("#schedules tr[data-id]")
    assert await job_row.count() == 1
    assert await runtime_rows.count() == 3
    assert "Close the books" in await job_row.inner_text()
    await shot(page, "catalog")
    await page.select_option("#filters select[name=source]", "catalog")
    await page.click("#filters button")
    await page.wait_for_url("**source=catalog*")
    assert (await job_row.count(), await runtime_rows.count()) == (1, 0)
    await page.select_option("#filters select[name=source]", "runtime")
    await page.click("#filters button")
    await page.wait_for_url("**source=runtime*")
    assert await page.locator("#schedules tr[data-job]").count() == 0
    assert await runtime_rows.count() == 3
    await page.goto(f"/ui/jobs/{job_id}")
    assert "Active" in await page.inner_text("#active")
    await page.fill("#pause input[name=note]", "quarter close")
    await page.click("#pause button")
    paused = await page.inner_text("#paused")
    assert re.search(r"Paused by api-key:\d+ with `schedules pause` .*: quarter close", paused)

    async def listed_paused() -> None:  # the list reads Temporal's listing: it may lag
        await page.goto("/ui/schedules?source=catalog&state=paused")
        assert await job_row.count() == 1, await page.inner_text("#schedules")
        assert "quarter close" in await job_row.inner_text()

    await assert_eventually(listed_paused, timeout=30)
    await page.goto(f"/ui/jobs/{job_id}")
    await page.fill("#explain input[name=slot]", f"{_NOW.year - 1}-01-01T03:00")
    await page.click("#explain button")
    verdict = await page.inner_text("#verdict")
    assert verdict.startswith(f"{job_id} at {_NOW.year - 1}-01-01 03:00 GMT"), verdict
    await shot(page, "catalog-job")
    await page.click("#resume button")
    await page.wait_for_selector("#active")
    await page.goto("/ui/schedules")


async def walk_schedule(page: Page, march_id: int) -> None:
    """Filter to acme's paused schedules, open march-close, read its DST note, explain
    a slot of last March (paused: not run), resume it."""
    await page.fill("#filters input[name=tenant]", "acme")
    await page.select_option("#filters select[name=state]", "paused")
    await page.click("#filters button")
    rows = page.locator("#schedules tr[data-id]")
    await page.wait_for_url("**state=paused*")
    await assert_eventually(lambda: _count(rows, 2))
    assert "globex" not in await page.inner_text("#schedules")
    assert "ledger migration" in await page.inner_text(f"tr[data-id='{march_id}']")
    await shot(page, "schedules")
    await page.click(f"tr[data-id='{march_id}'] a >> nth=1")
    fires = await page.inner_text("#fires")
    assert "DST: spring forward" in fires, fires
    assert "EDT" in fires and "EST" in fires, fires  # local times both sides of the change
    # The Tuesday after the last spring-forward day wholly past: after the schedule's
    # creation, while it was paused.
    last_march = _second_sunday_of_march(_NOW.year - ((_NOW.month, _NOW.day) <= (3, 15)))
    await page.fill("#explain input[name=slot]", f"{last_march + timedelta(days=2):%Y-%m-%d}T02:30")
    await page.click("#explain button")
    verdict = await page.inner_text("#verdict")
    assert "paused by ops:alice (ledger migration): not run" in verdict, verdict
    await shot(page, "schedule")
    await page.fill("#resume input[name=note]", "migration done")
    await page.click("#resume button")
    await page.wait_for_selector("#active")
    changes = await page.inner_text("#changes")
    assert re.search(r"api-key:\d+\s+resume: migration done", changes), changes


async def _count(rows, n: int) -> None:
    assert await rows.count() == n, (rows.page.url, await rows.page.inner_text("#schedules"))


def _second_sunday_of_march(year: int) -> datetime:
    day = datetime(year, 3, 8)
    return day + timedelta(days=(6 - day.weekday()) % 7)


async def walk_backfill(page: Page, db, database_url, client, task_queue, ten_id: int) -> None:
    """Preview a past range of ten-minutely (N slots), run exactly those, see each one's
    outcome; the ledger holds exactly those N runs."""
    await page.goto(f"/ui/schedules/{ten_id}/backfill")
    await page.fill("#range input[name=start]", f"{T0:%Y-%m-%dT%H:%M}")
    await page.fill("#range input[name=end]", f"{T0 + timedelta(minutes=40):%Y-%m-%dT%H:%M}")
    await page.click("#range button")
    summary = await page.inner_text("#summary")
    assert f"{N} will run" in summary, summary
    assert await page.locator("#slots tr:has-text('will run')").count() == N
    await shot(page, "backfill-preview")
    await page.click("#run button")
    await page.wait_for_selector("#done")
    assert f"Recorded {N} slot(s)" in await page.inner_text("#done")
    async with dispatcher(database_url, client, task_queue) as d:
        await tick_all(d, datetime.now(UTC))  # starts the backfill's intents
    await settled(db, N)
    rows = db.execute(
        "SELECT scheduled_at, status, origin FROM job_executions WHERE job_name = %s"
        " ORDER BY scheduled_at",
        (f"rt-{ten_id}",),
    ).fetchall()
    assert rows == [(T0 + timedelta(minutes=10 * i), "completed", "backfill") for i in range(N)]
    await page.reload()
    assert await page.locator("#slots tr:has-text('completed (backfill)')").count() == N
    await shot(page, "backfill-done")


# --- without a browser ----------------------------------------------------------------


def _log_in(web: httpx.Client, key: str) -> None:
    """Start a session of `key` on `web`: the login form's token, then the form."""
    web.get("/ui/login")
    answer = web.post("/ui/login", data={"key": key, "csrf": web.cookies["sj_login"]})
    assert answer.status_code == 303, answer.text


async def test_a_tenant_key_opens_no_page(api: LiveApi, database_url):
    schedule = (await tenants.create(database_url, OTHER, by="test")).schedule
    tenant_key = await api.key("globex")
    with httpx.Client(base_url=api.url, timeout=30) as web:
        web.get("/ui/login")
        answer = web.post("/ui/login", data={"key": tenant_key, "csrf": web.cookies["sj_login"]})
        assert answer.status_code == 401
        assert "key: not a valid operator key" in answer.text
        assert "sj_session" not in web.cookies
        # A bearer key is no session either.
        web.headers["Authorization"] = f"Bearer {tenant_key}"
        for path in ("/ui/schedules", f"/ui/schedules/{schedule.id}",
                     f"/ui/schedules/{schedule.id}/backfill", "/ui/jobs/invoice-reminders"):  # fmt: skip
            answer = web.get(path)
            assert (answer.status_code, answer.headers["location"]) == (303, "/ui/login"), path


async def test_each_form_without_its_csrf_token_is_refused_and_writes_nothing(
    api: LiveApi, database_url, db
):
    fresh_ids(db)
    made = await tenants.create(
        database_url, TEN_MINUTELY, by="test", clock=clock(T0 - timedelta(minutes=5))
    )
    sid = made.schedule.id
    before = _written(db, sid)
    range_ = {
        "start": f"{T0:%Y-%m-%dT%H:%M}",
        "end": f"{T0 + timedelta(minutes=40):%Y-%m-%dT%H:%M}",
    }
    forms = {
        f"/ui/schedules/{sid}/pause": {"note": "csrf"},
        f"/ui/schedules/{sid}/resume": {"note": "csrf"},
        f"/ui/schedules/{sid}/trigger": {},
        f"/ui/schedules/{sid}/backfill": range_,
        # A catalog job's forms: refused before the job is looked up or Temporal asked.
        "/ui/jobs/invoice-reminders/pause": {"note": "csrf"},
        "/ui/jobs/invoice-reminders/resume": {"note": "csrf"},
        "/ui/jobs/invoice-reminders/trigger": {},
        "/ui/logout": {},
    }
    key = await api.key(None)
    with httpx.Client(base_url=api.url, timeout=30) as web:
        _log_in(web, key)
        for path, data in forms.items():
            for token in (None, "forged"):
                sent = data if token is None else {**data, "csrf": token}
                answer = web.post(path, data=sent)
                assert answer.status_code == 403, (path, answer.text)
                assert "without its CSRF token" in answer.text
        assert web.get("/ui/schedules").status_code == 200  # the logout was refused too
    with httpx.Client(base_url=api.url, timeout=30) as web:
        web.get("/ui/login")
        answer = web.post("/ui/login", data={"key": "whatever"})  # no login token
        assert answer.status_code == 403
    assert _written(db, sid) == before


def _written(db, sid: int) -> tuple:
    """What a form could write: the schedule's version, its change log, its intents."""
    return db.execute(
        "SELECT (SELECT version FROM runtime_schedules WHERE id = %(id)s),"
        " (SELECT count(*) FROM runtime_schedule_changes WHERE schedule_id = %(id)s),"
        " (SELECT count(*) FROM runtime_dispatch_intents WHERE schedule_id = %(id)s)",
        {"id": sid},
    ).fetchone()


async def test_a_trusted_proxys_header_signs_in_and_no_other_address_is_believed(database_url):
    for proxy, believed in (("127.0.0.1", True), ("192.0.2.1", False)):
        settings = ApiSettings(
            database_url=database_url,
            api_proxy_user_header="X-Forwarded-User",
            api_trusted_proxy=proxy,
        )
        async with serving(settings) as live:
            with httpx.Client(base_url=live.url, timeout=30) as web:
                answer = web.get("/ui/schedules", headers={"X-Forwarded-User": "alice"})
        if believed:
            assert answer.status_code == 200 and "proxy:alice" in answer.text
        else:
            assert (answer.status_code, answer.headers["location"]) == (303, "/ui/login")


async def test_a_temporal_that_cannot_be_asked_is_one_line_and_the_runtime_rows_still_show(
    database_url,
):
    """Nothing listens at TEMPORAL_ADDRESS: the list says so in one line, shows the catalog
    jobs' state as unknown and the runtime schedules as always; a job's page says so; its
    pause form changes nothing (503)."""
    made = (await tenants.create(database_url, OTHER, by="test")).schedule
    address = f"127.0.0.1:{free_port()}"
    settings = ApiSettings(database_url=database_url, temporal_address=address)
    async with serving(settings) as live:
        key = await live.key(None)
        with httpx.Client(base_url=live.url, timeout=30) as web:
            _log_in(web, key)
            listed = web.get("/ui/schedules")
            assert listed.status_code == 200
            assert f"Temporal at {address} cannot be asked" in listed.text
            assert 'data-job="invoice-reminders"' in listed.text and "state-unknown" in listed.text
            assert f'data-id="{made.id}"' in listed.text
            page = web.get("/ui/jobs/invoice-reminders")
            assert page.status_code == 200 and 'id="server-error"' in page.text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            answer = web.post("/ui/jobs/invoice-reminders/pause", data={"note": "x", "csrf": csrf})
            assert answer.status_code == 503
            assert "cannot be asked" in answer.text and "nothing was changed" in answer.text
            assert "Traceback" not in answer.text
