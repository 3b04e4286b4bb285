"""The workflow ids of slot runs, built in one place.

A catalog job's schedule starts the run of a slot as `<job id>-<slot UTC>Z`: the id comes
from Temporal (the schedule id followed by the scheduled time), and everything that looks a
run up by its slot (backfills, waits, the audit, explain) builds the same string here.
"""

from __future__ import annotations

from datetime import UTC, datetime


def stamp(slot: datetime) -> str:
    """A slot as workflow ids carry it, to the second in UTC: `2027-03-14T07:00:00Z`."""
    return f"{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def workflow_id(job_id: str, slot: datetime) -> str:
    """The id of the workflow `job_id`'s schedule starts for `slot`: `<job id>-<slot>Z`."""
    return f"{job_id}-{stamp(slot)}"
