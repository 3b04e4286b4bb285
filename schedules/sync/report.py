"""What a sync did (or, dry, would do): each schedule's change field by field, as data and
as the text `sync` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedules.catalog.times import utc_text
from schedules.health.verify import Verdict


@dataclass
class Change:
    """What sync does (or would do) to one schedule."""

    job_id: str
    action: str  # create | update | delete | unchanged
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name -> (old, new)
    drift: list[str] = field(default_factory=list)
    # An update that changes the timing: the timing it replaces (a `Timing`), and what the
    # edit decided for the slots it stranded (`schedules.edits.Decision`s).
    before: Any = None
    edited: list[Any] = field(default_factory=list)


@dataclass
class SyncReport:
    changes: list[Change] = field(default_factory=list)
    described: int = 0
    """Schedules the plan described; the listing's digests vouched for the other jobs."""
    managed: int = 0
    """Schedules on the server this project manages, as the plan listed them."""
    verification: list[str] = field(default_factory=list)
    """What checking the written schedules on the server did (`schedules.health.verify`)."""
    unverified: list[Verdict] = field(default_factory=list)
    """Written schedules that still fire other times than intended, or could not be
    checked: the sync did not succeed."""
    shards_from: datetime | None = None
    """The first tick of the dispatch shards this sync recorded (`schedules.sync.shards`)."""

    def ids(self, action: str) -> list[str]:
        return [c.job_id for c in self.changes if c.action == action]

    @property
    def created(self) -> list[str]:
        return self.ids("create")

    @property
    def updated(self) -> list[str]:
        return self.ids("update")

    @property
    def deleted(self) -> list[str]:
        return self.ids("delete")

    @property
    def drift(self) -> list[Change]:
        return [c for c in self.changes if c.drift]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_report(report: SyncReport, dry_run: bool) -> str:
    """The human-readable account of a sync, field by field."""
    if dry_run:
        verb = {"create": "would create", "update": "would update", "delete": "would delete"}
    else:
        verb = {"create": "created", "update": "updated", "delete": "deleted"}
    lines = []
    for change in report.changes:
        if change.action != "unchanged":
            lines.append(f"{verb[change.action]:<13} {change.job_id}")
            for name, (old, new) in change.fields.items():
                lines.append(f"    {name}: {_show(old)} -> {_show(new)}")
        for decided in change.edited:
            what = "kept, run now" if decided.outcome == "run" else "DROPPED"
            lines.append(
                f"    slot {utc_text(decided.strand.slot)} (was due "
                f"{utc_text(decided.strand.was_due)}): {what}: {decided.reason}"
            )
        for note in change.drift:
            lines.append(f"drift         {change.job_id}: {note}")
    if not any(c.action != "unchanged" for c in report.changes):
        lines.insert(0, "no changes")
    lines += [f"verified      {line}" for line in report.verification]
    return "\n".join(lines)
