"""Every test that runs slots ends with the audit clean (docs/development.md): `audited`,
the one implementation users' tests get too (`devstack.testing`); `audit_report` for a
test that expects findings."""

from datetime import datetime, timedelta

from devstack.testing.audit import audit_report, audited

__all__ = ["audit_report", "audited", "one_slot"]


def one_slot(slot: datetime) -> dict[str, datetime]:
    """The audit's window around one slot (`start` and `end`): a minute before it to just
    after it, so nothing else of the job's history is judged."""
    return {"start": slot - timedelta(minutes=1), "end": slot + timedelta(seconds=1)}
