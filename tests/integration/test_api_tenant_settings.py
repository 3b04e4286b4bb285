"""A tenant's limits and notice channels over the HTTP API (api/routes/tenants.py, issue
40's API exposure), on a live uvicorn and PostgreSQL: the operator sets them, a tenant's
key reads its own and sets nothing, another tenant's answers 404, bad input is one
problem+json line with nothing written, and the webhook's secret is shown once."""

from __future__ import annotations

from schedules import tenants
from tests.helpers.api import LiveApi

PROBLEM = "application/problem+json"
HOOK = "https://hooks.example.com/notices/tok-s3cr3t-path"


def _refused(answer, status: int, starts: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    detail = answer.json()["detail"]
    assert detail.startswith(starts) and "\n" not in detail, detail


async def test_the_operator_sets_limits_and_a_tenant_reads_its_own(api: LiveApi):
    operator, acme = await api.key(None), await api.key("acme")
    operator_id = operator.split("_")[1]
    with api.client(operator) as ops, api.client(acme) as own:
        made = ops.patch("/v1/tenants/acme/limits", json={"max_in_flight": 2, "weight": 3})
        assert made.status_code == 200, made.text
        limits = made.json()
        assert (limits["max_in_flight"], limits["max_per_minute"], limits["weight"]) == (2, None, 3)
        assert limits["updated_by"] == f"api-key:{operator_id}" and limits["in_flight"] == 0
        assert "default_max_per_minute" in limits

        read = own.get("/v1/tenants/acme/limits")
        assert read.status_code == 200 and read.json() == limits
        # The same row `python -m schedules tenants limits show acme` reads.
        stored = await tenants.limits(api.database_url, "acme")
        assert (stored.max_in_flight, stored.weight) == (2, 3)

        _refused(own.patch("/v1/tenants/acme/limits", json={"max_in_flight": 50}), 403, "limits:")
        assert own.patch("/v1/tenants/acme/limits", json={}).json()["code"] == "forbidden"
        _refused(own.delete("/v1/tenants/acme/limits"), 403, "limits:")
        # Another tenant's limits: as a tenant that does not exist, whatever the verb.
        for answer in (
            own.get("/v1/tenants/globex/limits"),
            own.patch("/v1/tenants/globex/limits", json={"max_in_flight": 1}),
            own.delete("/v1/tenants/globex/limits"),
        ):
            _refused(answer, 404, "no tenant 'globex'")

        _refused(
            ops.patch("/v1/tenants/acme/limits", json={"max_in_flight": 0}), 422, "max_in_flight:"
        )
        _refused(ops.patch("/v1/tenants/acme/limits", json={}), 422, "limits: give at least one")
        _refused(ops.patch("/v1/tenants/acme/limits", json={"burst": 9}), 422, "burst:")
        assert own.get("/v1/tenants/acme/limits").json() == limits  # nothing written

        cleared = ops.delete("/v1/tenants/acme/limits")
        assert cleared.status_code == 200, cleared.text
        assert (cleared.json()["max_in_flight"], cleared.json()["weight"]) == (None, 1)


async def test_notice_channels_are_the_operators_and_the_secret_is_shown_once(api: LiveApi):
    operator, acme = await api.key(None), await api.key("acme")
    channels = {"webhook_url": HOOK, "emails": ["ops@acme.test"]}
    with api.client(operator) as ops, api.client(acme) as own:
        _refused(own.get("/v1/tenants/acme/notices"), 404, "tenant 'acme' has no notice channels")
        _refused(own.put("/v1/tenants/acme/notices", json=channels), 403, "notice channels:")
        _refused(
            ops.put("/v1/tenants/acme/notices", json={"webhook_url": "ftp://x"}), 422, "webhook:"
        )
        _refused(
            ops.put("/v1/tenants/acme/notices", json={"emails": ["not an address"]}), 422, "email:"
        )
        _refused(ops.put("/v1/tenants/acme/notices", json={}), 422, "notify: give a webhook")
        _refused(ops.get("/v1/tenants/acme/notices"), 404, "tenant 'acme'")  # none written

        made = ops.put("/v1/tenants/acme/notices", json=channels)
        assert made.status_code == 200, made.text
        first = made.json()
        assert first["webhook"] == "https://hooks.example.com/..." and "s3cr3t" not in made.text
        assert first["emails"] == ["ops@acme.test"] and first["secret"].startswith("whsec_")
        stored = await tenants.notices(api.database_url, "acme")
        assert (stored.webhook_url, stored.secret) == (HOOK, first["secret"])

        again = ops.put("/v1/tenants/acme/notices", json=channels | {"emails": []})
        assert again.status_code == 200 and again.json()["secret"] is None
        read = own.get("/v1/tenants/acme/notices")
        assert read.status_code == 200 and read.json()["emails"] == []
        assert read.json()["secret"] is None and first["secret"] not in read.text
        assert "s3cr3t" not in read.text

        rotated = ops.put("/v1/tenants/acme/notices", json=channels | {"rotate_secret": True})
        assert rotated.json()["secret"].startswith("whsec_")
        assert rotated.json()["secret"] != first["secret"]

        _refused(own.get("/v1/tenants/globex/notices"), 404, "no tenant 'globex'")
        _refused(own.delete("/v1/tenants/acme/notices"), 403, "notice channels:")
        assert ops.delete("/v1/tenants/acme/notices").status_code == 204
        _refused(own.get("/v1/tenants/acme/notices"), 404, "tenant 'acme' has no notice channels")
        _refused(
            ops.delete("/v1/tenants/acme/notices"), 404, "tenant 'acme' has no notice channels"
        )
