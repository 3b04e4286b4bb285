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
