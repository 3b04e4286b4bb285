"""One finding of the audit: its kind, the job and slot, what is wrong, and the witnesses
that show it (row ids, workflow and run ids, outbox ids, attempts, journal seqs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Finding:
    kind: str
    job: str | None
    slot: datetime | None
    detail: str
    witnesses: dict[str, Any] = field(default_factory=dict)


# The ledger row's columns a finding about it names (besides its id, as `execution_id`).
ROW_COLUMNS = ("status", "origin", "attempt", "workflow_id", "run_id")


def row_witnesses(row: Any) -> dict[str, Any]:
    """A ledger row as a finding's witnesses."""
    return {"execution_id": row.id} | {name: getattr(row, name) for name in ROW_COLUMNS}
