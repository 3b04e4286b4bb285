"""What a job can run: each kind names its work activity and its typed params model.

The catalog validates a job's `params` against its kind's model before anything reaches
Temporal, and the worker registers every kind's activity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from activities.cleanup import CleanupActivities, CleanupParams
from activities.hourly_sync import HourlySyncActivities, HourlySyncParams
from activities.invoices import InvoiceActivities, InvoiceReminderParams
from activities.reconcile import ReconcileActivities, ReconcileParams
from activities.relay import RelayActivities, RelayParams
from activities.settlement import SettlementActivities, SettlementParams


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
        JobKind(
            name="outbox-relay",
            activity="relay_outbox",
            params=RelayParams,
            description="deliver due outbox messages by email or webhook, at least once",
            owner=RelayActivities,
        ),
        JobKind(
            name="card-settlement",
            activity="settle_card_payments",
            params=SettlementParams,
            description="settle captured card payments up to the slot's time, one batch a run",
            owner=SettlementActivities,
        ),
        JobKind(
            name="nightly-reconcile",
            activity="reconcile_ledger",
            params=ReconcileParams,
            description="reconcile the ledger with settled payments for the previous local day",
            owner=ReconcileActivities,
        ),
        JobKind(
            name="hourly-sync",
            activity="sync_hourly_totals",
            params=HourlySyncParams,
            description="aggregate the slot's own hour of events per account, once per window",
            owner=HourlySyncActivities,
        ),
        JobKind(
            name="weekly-cleanup",
            activity="delete_expired_records",
            params=CleanupParams,
            description="delete delivered outbox messages and old executions, in short batches",
            owner=CleanupActivities,
        ),
    )
}
