"""What a test of scheduled jobs needs beside real servers: poll with a deadline, run real
worker processes, and judge the history with the audit (`audited`).

The fixtures that start the servers are the pytest plugin `devstack.pytest_plugin`
(docs/testing.md); these helpers are for the tests themselves. They need the `[local]`
extra (the servers) and pytest.
"""

from devstack.testing.audit import audit_report, audited, runtime_audited
from devstack.testing.polling import assert_eventually, wait_for_text
from devstack.testing.runs import run_now, run_slot_now
from devstack.testing.worker import WorkerProcess, settings_env

TEMPLATE_DB = "jobs_template"
"""The migrated database every test's database is cloned from (`devstack.pytest_plugin`)."""

__all__ = [
    "TEMPLATE_DB",
    "WorkerProcess",
    "assert_eventually",
    "audit_report",
    "audited",
    "run_now",
    "run_slot_now",
    "runtime_audited",
    "settings_env",
    "wait_for_text",
]
