"""What a job can run: each kind names its work activity and its typed params model.

The catalog validates a job's `params` against its kind's model before anything reaches
Temporal, and the worker registers every kind's activity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from activities.invoices import InvoiceActivities, InvoiceReminderParams


@dataclass(frozen=True)
class JobKind:
    """A kind of job: its work activity (a method of `owner`, built with the pool)."""

    name: str
    activity: str
    params: type[BaseModel]
    description: str
    owner: type


def build_kind_activities(pool: Any) -> list[Callable]:
    """Every kind's work activity, one owner instance per class, bound to `pool`."""
    owners: dict[type, Any] = {}
    found = []
    for kind in KINDS.values():
        owner = owners.setdefault(kind.owner, kind.owner(pool))
        found.append(getattr(owner, kind.activity))
    return found


KINDS: dict[str, JobKind] = {
    kind.name: kind
    for kind in (
        JobKind(
            name="invoice-reminders",
            activity="send_invoice_reminders",
            params=InvoiceReminderParams,
            description="remind overdue unpaid invoices, one outbox message each",
            owner=InvoiceActivities,
        ),
    )
}
