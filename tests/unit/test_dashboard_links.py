"""Where the health page's findings link (api/pages/health.py `Links`): a runtime
schedule's or a catalog job's page and its slot's explain here; a run in the Temporal Web
UI (`TEMPORAL_UI_URL`); a kind's or a tenant's schedules in the list."""

from __future__ import annotations

from api.pages.health import Links
from api.settings import ApiSettings

LINKS = Links.of(
    ApiSettings(temporal_ui_url="https://temporal.example.com/", temporal_namespace="prod ns")
)
UI = "https://temporal.example.com/namespaces/prod%20ns"


def test_a_runtime_schedule_and_its_slot_link_here():
    assert LINKS.schedule("rt-12") == "/ui/schedules/12"
    assert LINKS.slot("rt-12", "2027-03-14T07:00:00Z") == (
        "/ui/schedules/12?slot=2027-03-14T07%3A00%3A00Z"
    )


def test_a_catalog_job_and_its_slot_link_here_and_a_run_to_the_temporal_ui():
    assert LINKS.schedule("nightly-reconcile") == "/ui/jobs/nightly-reconcile"
    assert LINKS.run("nightly-reconcile-2027-03-14T07:00:00Z", "0b1c-run") == (
        f"{UI}/workflows/nightly-reconcile-2027-03-14T07%3A00%3A00Z/0b1c-run/history"
    )
    # A run of a slot whose run id is not known: the runs of its workflow id, newest first.
    assert LINKS.run("nightly-reconcile-2027-03-14T07:00:00Z") == (
        f"{UI}/workflows?query=WorkflowId%3D%22nightly-reconcile-2027-03-14T07%3A00%3A00Z%22"
    )
    assert LINKS.slot("nightly-reconcile", "2027-03-14T07:00:00Z") == (
        "/ui/jobs/nightly-reconcile?slot=2027-03-14T07%3A00%3A00Z"
    )


def test_an_alert_about_many_schedules_links_to_the_filtered_list():
    assert LINKS.schedule("runtime:weekly-report", "last_run_failed") == (
        "/ui/schedules?kind=weekly-report&state=failing"
    )
    assert LINKS.schedule("tenant:acme", "tenant_deferred") == "/ui/schedules?tenant=acme"
    assert LINKS.schedule("outbox") is None and LINKS.slot("rt-12", None) is None
