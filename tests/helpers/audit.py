"""Every test that runs slots ends with the audit clean (docs/development.md): `audited`,
the one implementation users' tests get too (`devstack.testing`); `audit_report` for a
test that expects findings."""

from devstack.testing.audit import audit_report, audited

__all__ = ["audit_report", "audited"]
