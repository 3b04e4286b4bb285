"""The HTTP API (api/, issue 38) on a live uvicorn, the real pool and PostgreSQL: keys,
errors as problem+json, and the schedules resource over `schedules.tenants`."""

from __future__ import annotations

import json

import psycopg

from api.settings import ApiSettings
from devstack.ports import free_port
from tests.helpers.api import LiveApi, serving

WEEKLY = {
    "name": "weekly-report",
    "kind": "test-noop",
    "cron": "0 8 * * 1",
    "timezone": "America/New_York",
    "params": {"label": "weekly"},
}
PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def changes_by(database_url: str) -> list[tuple[str, str]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT action, by FROM runtime_schedule_changes ORDER BY id"
        ).fetchall()


async def test_health_and_readiness(api: LiveApi):
    with api.client(None) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").json() == {"status": "ready"}


async def test_create_then_read_a_schedule_with_a_tenant_key(api: LiveApi):
    key = await api.key("acme")
    with api.client(key) as http:
        made = http.post("/v1/schedules", json=WEEKLY)
        assert made.status_code == 201, made.text
        schedule = made.json()
        assert (schedule["tenant"], schedule["name"], schedule["version"]) == (
            "acme",
            "weekly-report",
            1,
        )
        assert made.headers["ETag"] == '"1"'
        assert made.headers["Location"] == f"/v1/schedules/{schedule['id']}"

        again = http.post("/v1/schedules", json=WEEKLY)
        assert (again.status_code, again.json()["id"]) == (200, schedule["id"])

        read = http.get(made.headers["Location"])
        assert read.status_code == 200 and read.json() == schedule
    key_id = key.split("_")[1]
    assert changes_by(api.database_url) == [("create", f"api-key:{key_id}")]


async def test_no_wrong_or_revoked_key_is_one_401_line(api: LiveApi):
    from api import keys

    key = await api.key("acme")
    key_id = int(key.split("_")[1])
    wrong = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    for sent in (None, "nonsense", wrong, "sjk_999999_x"):
        with api.client(sent) as http:
            answer = http.get("/v1/schedules/1")
        assert answer.status_code == 401, (sent, answer.text)
        assert answer.headers["content-type"] == PROBLEM
        assert answer.json()["detail"].count("\n") == 0
    from datetime import UTC, datetime

    await keys.revoke(api.database_url, key_id, now=datetime.now(UTC))
    with api.client(key) as http:
        assert http.get("/v1/schedules/1").status_code == 401


async def test_a_refused_create_is_problem_json_in_the_libraries_words(api: LiveApi):
    with api.client(await api.key("acme")) as http:
        answer = http.post("/v1/schedules", json=WEEKLY | {"cron": "61 * * * *"})
        assert answer.status_code == 422
        assert answer.headers["content-type"] == PROBLEM
        problem = answer.json()
        assert problem["status"] == 422 and problem["code"] == "invalid"
        assert "cron" in problem["detail"] and "61" in problem["detail"]
        missing = http.get("/v1/schedules/424242")
        assert missing.status_code == 404
        assert missing.json()["detail"] == "no runtime schedule has id 424242"
    assert changes_by(api.database_url) == []


async def test_update_needs_the_version_it_read(api: LiveApi):
    with api.client(await api.key("acme")) as http:
        made = http.post("/v1/schedules", json=WEEKLY).json()
        url = f"/v1/schedules/{made['id']}"
        missing = http.patch(url, json={"cron": "0 9 * * 1"})
        assert missing.status_code == 428 and "If-Match" in missing.json()["detail"]
        moved = http.patch(url, json={"cron": "0 9 * * 1"}, headers={"If-Match": '"1"'})
        assert moved.status_code == 200, moved.text
        assert (moved.json()["cron"], moved.headers["ETag"]) == ("0 9 * * 1", '"2"')
        stale = http.patch(url, json={"cron": "0 10 * * 1"}, headers={"If-Match": '"1"'})
        assert stale.status_code == 412
        assert "current version is 2" in stale.json()["detail"]
        unknown = http.patch(url, json={"tenant": "globex"}, headers={"If-Match": '"2"'})
        assert unknown.status_code == 422 and unknown.json()["detail"].startswith("tenant:")
        assert http.get(url).json()["cron"] == "0 9 * * 1"


async def test_pause_resume_delete_and_the_change_log_names_the_key(api: LiveApi):
    key = await api.key("acme")
    with api.client(key) as http:
        made = http.post("/v1/schedules", json=WEEKLY).json()
        url = f"/v1/schedules/{made['id']}"
        paused = http.post(f"{url}/pause", json={"note": "card expired"}).json()
        assert (paused["paused"], paused["note"]) == (True, "card expired")
        empty = http.post(f"{url}/pause", json={"note": ""})
        assert empty.status_code == 422 and empty.json()["detail"].startswith("note:")
        assert http.post(f"{url}/resume").json()["paused"] is False
        http.post(f"{url}/pause", json={"note": "card expired again"})
        blank = http.post(f"{url}/resume", json={"note": ""})
        assert blank.status_code == 422 and blank.json()["detail"].startswith("note:")
        resumed = http.post(f"{url}/resume", json={"note": "card renewed"})
        assert resumed.status_code == 200 and resumed.json()["paused"] is False
        gone = http.delete(url, headers={"If-Match": '"5"'})
        assert gone.status_code == 200 and gone.json()["deleted_at"] is not None
        assert http.post(f"{url}/pause", json={"note": "x"}).status_code == 404
    author = f"api-key:{key.split('_')[1]}"
    actions = ("create", "pause", "resume", "pause", "resume", "delete")
    assert changes_by(api.database_url) == [(action, author) for action in actions]
    # Who and why, as the dashboard and `tenants resume --note` record them: the note in
    # the change log's row of each pause and resume (none for a resume without a body).
    with psycopg.connect(api.database_url) as conn:
        notes = conn.execute(
            "SELECT action, after->>'note' FROM runtime_schedule_changes"
            " WHERE action IN ('pause', 'resume') ORDER BY id"
        ).fetchall()
    assert notes == [
        ("pause", "card expired"),
        ("resume", ""),
        ("pause", "card expired again"),
        ("resume", "card renewed"),
    ]


async def test_list_pages_by_cursor_and_filters(api: LiveApi):
    with api.client(await api.key("acme")) as http:
        for n in range(5):
            kind = {"kind": "test-noop"} if n % 2 else {}
            http.post("/v1/schedules", json=WEEKLY | kind | {"name": f"s{n}"})
        seen, cursor = [], 0
        while cursor is not None:
            page = http.get("/v1/schedules", params={"limit": 2, "cursor": cursor}).json()
            seen += [s["name"] for s in page["schedules"]]
            cursor = page["next_cursor"]
        assert seen == [f"s{n}" for n in range(5)]
        http.post(f"/v1/schedules/{http.get('/v1/schedules/by-name/s1').json()['id']}/pause",
                  json={"note": "n"})  # fmt: skip
        paused = http.get("/v1/schedules", params={"paused": "true"}).json()["schedules"]
        assert [s["name"] for s in paused] == ["s1"]
        assert http.get("/v1/schedules/by-name/nope").status_code == 404


async def test_slots_next_times_backfill_dry_run_explain_and_runs(api: LiveApi):
    with api.client(await api.key("acme")) as http:
        made = http.post("/v1/schedules", json=WEEKLY | {"cron": "0 8 * * *"}).json()
        url = f"/v1/schedules/{made['id']}"
        times = http.get(f"{url}/next", params={"count": 3}).json()
        assert times["timezone"] == "America/New_York" and len(times["fire_times"]) == 3
        window = {"start": "2026-03-07T00:00:00-05:00", "end": "2026-03-10T00:00:00-04:00"}
        dry = http.post(f"{url}/backfill", json=window | {"dry_run": True})
        assert dry.status_code == 200, dry.text
        # 08:00 New York on 7 (EST), 8 and 9 March 2026 (EDT from the 8th).
        assert dry.json()["would_run"] == [
            "2026-03-07T13:00:00Z",
            "2026-03-08T12:00:00Z",
            "2026-03-09T12:00:00Z",
        ]
        assert dry.json()["recorded"] == []
        naive = http.post(f"{url}/backfill", json={"start": "2026-03-07T00:00:00", "end": "x"})
        assert naive.status_code == 422 and naive.json()["detail"].startswith("start:")
        explained = http.get(f"{url}/explain", params={"slot": "2026-03-07T13:00:00Z"}).json()
        assert explained["fire_time"] is True and explained["ran"] is False
        assert http.get(f"{url}/runs").json() == {"schedule_id": made["id"], "runs": []}
        triggered = http.post(f"{url}/trigger")
        assert triggered.status_code == 202 and len(triggered.json()["workflow_ids"]) == 1


async def test_apply_a_desired_set_and_export_it(api: LiveApi):
    with api.client(await api.key("acme")) as http:
        http.post("/v1/schedules", json=WEEKLY | {"name": "old"})
        wanted = {"schedules": [WEEKLY, WEEKLY | {"name": "daily", "cron": "0 6 * * *"}]}
        dry = http.put("/v1/schedules", json=wanted | {"dry_run": True}).json()
        assert (dry["created"], dry["deleted"]) == (["daily", "weekly-report"], ["old"])
        assert http.get("/v1/schedules/by-name/old").status_code == 200  # nothing written
        assert http.put("/v1/schedules", json=wanted).json()["deleted"] == ["old"]
        exported = http.get("/v1/export")
        assert exported.headers["content-type"].startswith("application/x-ndjson")
        names = [json.loads(line)["name"] for line in exported.text.splitlines()]
        assert sorted(names) == ["daily", "weekly-report"]


async def test_malformed_oversized_and_wrong_type_bodies_are_4xx(api: LiveApi):
    with api.client(await api.key("acme")) as http:
        bad = http.post("/v1/schedules", content=b"{nope", headers=JSON)
        assert bad.status_code == 400 and bad.json()["detail"].startswith("body:")
        assert http.post("/v1/schedules", content=b"[1]", headers=JSON).status_code == 422
        text = http.post("/v1/schedules", content=b"name=x", headers={"Content-Type": "text/plain"})
        assert text.status_code == 415 and "text/plain" in text.json()["detail"]
        huge = http.post("/v1/schedules", content=b"{" + b" " * (2 << 20) + b"}", headers=JSON)
        assert huge.status_code == 413 and huge.headers["content-type"] == PROBLEM
        assert http.get("/v1/schedules/99999999999999999999").status_code == 422
    assert changes_by(api.database_url) == []


async def test_a_key_over_its_rate_is_429_with_retry_after(database_url):
    limited = ApiSettings(database_url=database_url, api_rate_per_second=0.01, api_rate_burst=2)
    async with serving(limited) as live:
        with live.client(await live.key("acme")) as http:
            assert [http.get("/v1/schedules").status_code for _ in range(2)] == [200, 200]
            refused = http.get("/v1/schedules")
            assert refused.status_code == 429 and refused.headers["content-type"] == PROBLEM
            assert int(refused.headers["Retry-After"]) >= 1
        with live.client(await live.key("acme")) as other:  # another key: its own bucket
            assert other.get("/v1/schedules").status_code == 200


async def test_without_postgresql_it_lives_is_not_ready_and_answers_503(database_url):
    away = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    async with serving(ApiSettings(database_url=away, database_connect_timeout_seconds=2)) as live:
        with live.client("sjk_1_whatever") as http:
            assert http.get("/healthz").status_code == 200
            for path in ("/readyz", "/v1/schedules"):
                answer = http.get(path)
                assert answer.status_code == 503, answer.text
                assert answer.headers["content-type"] == PROBLEM
                assert answer.json()["detail"].startswith("PostgreSQL is unavailable")
                assert "postgres@" not in answer.text


async def test_a_text_no_schedule_can_hold_is_refused_naming_it(api: LiveApi):
    """Found by schemathesis: a NUL in a filter reached PostgreSQL, which refuses it (500)."""
    with api.client(await api.key(None)) as http:
        for path, params in [
            ("/v1/schedules", {"kind": "a\x00b"}),
            ("/v1/schedules", {"tenant": "a\x00b"}),
            ("/v1/schedules/by-name/a%00b", {"tenant": "acme"}),
            ("/v1/export", {"tenant": "a\x00b"}),
        ]:
            answer = http.get(path, params=params)
            assert answer.status_code == 422, (path, answer.text)
            assert "printable characters, got 'a\\x00b'" in answer.json()["detail"]
        applied = http.put("/v1/schedules", params={"tenant": "a\x00b"}, json={"schedules": []})
        assert applied.status_code == 422
