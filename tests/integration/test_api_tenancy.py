"""Tenancy through the HTTP API (issue 38, item 3): a tenant's key tries every operation
on another tenant's schedule, by id, by name, through list filters, bulk apply and
export. Nothing is read, nothing changes, and each answer is the answer for a schedule
that does not exist (the same status and body, the id or name aside)."""

from __future__ import annotations

import json

import psycopg

from tests.helpers.api import LiveApi

THEIRS = {
    "name": "payroll",
    "kind": "test-noop",
    "cron": "0 8 * * *",
    "timezone": "Europe/Paris",
    "params": {"label": "secret-label"},
}
MISSING_ID = 987654321
# Every operation on one schedule id: method, path under /v1/schedules/{id}, options.
BY_ID = [
    ("GET", "", {}),
    ("PATCH", "", {"json": {"cron": "0 9 * * *"}, "headers": {"If-Match": '"1"'}}),
    ("PATCH", "", {"json": {"cron": "0 9 * * *"}, "headers": {"If-Match": "*"}}),
    ("DELETE", "", {}),
    ("DELETE", "", {"headers": {"If-Match": '"1"'}}),
    ("POST", "/pause", {"json": {"note": "mine now"}}),
    ("POST", "/resume", {}),
    ("POST", "/trigger", {}),
    ("POST", "/backfill", {"json": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-03T00:00:00Z"}}),
    ("POST", "/backfill", {"json": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-03T00:00:00Z", "dry_run": True}}),
    ("GET", "/next", {}),
    ("GET", "/explain", {"params": {"slot": "2026-01-01T07:00:00Z"}}),
    ("GET", "/runs", {}),
]  # fmt: skip


def state(database_url: str) -> tuple:
    """Every row an operation could write: schedules, their change log, intents."""
    with psycopg.connect(database_url) as conn:
        return tuple(
            conn.execute(query).fetchall()
            for query in (
                "SELECT * FROM runtime_schedules ORDER BY id",
                "SELECT * FROM runtime_schedule_changes ORDER BY id",
                "SELECT * FROM runtime_dispatch_intents ORDER BY schedule_id, scheduled_at",
            )
        )


def shown(answer, *hidden: str) -> tuple[int, str, str]:
    """An answer as a client sees it, with `hidden` (an id, a name) masked."""
    text = answer.text
    for value in hidden:
        text = text.replace(value, "<masked>")
    return answer.status_code, answer.headers.get("content-type", ""), text


async def test_a_tenant_key_cannot_touch_or_learn_of_another_tenants_schedule(api: LiveApi):
    ours, theirs = await api.key("acme"), await api.key("globex")
    with api.client(theirs) as globex:
        target = globex.post("/v1/schedules", json=THEIRS).json()
    before = state(api.database_url)

    with api.client(ours) as acme:
        for method, path, options in BY_ID:
            found = acme.request(method, f"/v1/schedules/{target['id']}{path}", **options)
            missing = acme.request(method, f"/v1/schedules/{MISSING_ID}{path}", **options)
            assert found.status_code == 404, (method, path, found.text)
            assert shown(found, str(target["id"])) == shown(missing, str(MISSING_ID)), (
                method,
                path,
            )

        by_name = acme.get("/v1/schedules/by-name/payroll")
        assert shown(by_name, "payroll") == shown(acme.get("/v1/schedules/by-name/nope"), "nope")
        for params in ({}, {"kind": "test-noop"}, {"paused": "false"}, {"due": "true"}):
            assert acme.get("/v1/schedules", params=params).json()["schedules"] == []
        other = acme.get("/v1/schedules", params={"tenant": "globex"})
        nobody = acme.get("/v1/schedules", params={"tenant": "nobody"})
        assert other.status_code == 422
        assert shown(other, "globex") == shown(nobody, "nobody")
        assert acme.get("/v1/export").text == ""
        assert shown(acme.get("/v1/export", params={"tenant": "globex"}), "globex") == shown(
            acme.get("/v1/export", params={"tenant": "nobody"}), "nobody"
        )
        as_them = acme.put("/v1/schedules", json={"schedules": [THEIRS | {"tenant": "globex"}]})
        as_nobody = acme.put("/v1/schedules", json={"schedules": [THEIRS | {"tenant": "nobody"}]})
        assert as_them.status_code == 422
        assert shown(as_them, "globex") == shown(as_nobody, "nobody")
        assert acme.put("/v1/schedules", json={"schedules": [], "dry_run": True}).json() == {
            "created": [],
            "updated": {},
            "deleted": [],
            "unchanged": [],
        }
        created = acme.post("/v1/schedules", json=THEIRS | {"tenant": "globex"})
        assert created.status_code == 422

    assert state(api.database_url) == before  # nothing written by any of it
    with api.client(ours) as acme:
        # Acme's own schedule of the same name is acme's alone.
        mine = acme.post("/v1/schedules", json=THEIRS)
        assert mine.status_code == 201 and mine.json()["id"] != target["id"]
        assert [
            json.loads(line)["tenant"] for line in acme.get("/v1/export").text.splitlines()
        ] == ["acme"]
    with api.client(theirs) as globex:
        assert globex.get(f"/v1/schedules/{target['id']}").json() == target


async def test_an_operator_key_sees_every_tenant(api: LiveApi):
    with api.client(await api.key("globex")) as globex:
        target = globex.post("/v1/schedules", json=THEIRS).json()
    with api.client(await api.key(None)) as operator:
        assert operator.get(f"/v1/schedules/{target['id']}").json() == target
        listed = operator.get("/v1/schedules").json()["schedules"]
        assert [s["id"] for s in listed] == [target["id"]]
        named = operator.get("/v1/schedules/by-name/payroll", params={"tenant": "globex"})
        assert named.json()["id"] == target["id"]
        unnamed = operator.post("/v1/schedules", json=THEIRS | {"name": "x"})
        assert unnamed.status_code == 422 and "tenant" in unnamed.json()["detail"]
