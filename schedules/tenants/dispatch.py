"""The hook between the API and the dispatcher: start one recorded slot now.

`trigger` records a manual intent (`runtime_dispatch_intents`, started_at NULL) and, when
given a Temporal client, hands it to `start_slot`. Until the dispatcher provides the
starter, `start_slot` starts nothing and says so; the dispatcher's next tick starts every
intent not yet started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from temporalio.client import Client


@dataclass(frozen=True)
class Intent:
    """A slot decided for a start (a `runtime_dispatch_intents` row)."""

    schedule_id: int
    scheduled_at: datetime
    workflow_id: str
    origin: str
    decided_at: datetime
    started_at: datetime | None = None


async def start_slot(client: Client, intent: Intent) -> bool:
    """Start the run of `intent` now; whether it was started here (False: the dispatcher's
    next tick starts it). Implemented by the dispatcher."""
    return False
