"""Every test that runs slots ends with the audit clean (docs/development.md): `audited`,
the one implementation users' tests get too (`devstack.testing`)."""

from devstack.testing.audit import audited

__all__ = ["audited"]
