"""The HTTP API (api/, issue 38) on a live uvicorn, the real pool and PostgreSQL: keys,
errors as problem+json, and the schedules resource over `schedules.tenants`."""

from __future__ import annotations

import psycopg

from tests.helpers.api import LiveApi

WEEKLY = {
    "name": "weekly-report",
    "kind": "test-noop",
    "cron": "0 8 * * 1",
    "timezone": "America/New_York",
    "params": {"label": "weekly"},
}
PROBLEM = "application/problem+json"


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
