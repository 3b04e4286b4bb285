"""Every test that runs slots ends with the audit clean: `audited`.

The audit is the independent judge of a history (`python -m schedules audit`): a test that
ran slots for real, and meant no anomaly, asks it too, so a regression the test's own
assertions do not look for (a row left running, a lost slot, an outbox row queued twice, a
stale write) still fails it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client

from devstack.testing.polling import assert_eventually
from schedules.audit import AuditReport, run_audit
from schedules.audit.history import Window
from schedules.audit.runtime import RuntimeAudit, audit_runtime
from schedules.health.check import ScheduleState
from schedules.pauses import record_pause


async def audit_report(
    client: Client,
    database_url: str,
    task_queue: str,
    jobs: Sequence[Any],
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    states: dict[str, Any] | None = None,
    known: Sequence[Any] = (),
) -> AuditReport:
    """The audit of `jobs` over the scheduled times [start, end) as of now, with no settle
    time, judged once and not asserted: for a test that expects findings, or reads the
    report's counts. `audited` is the one that asserts the audit clean."""
    return await run_audit(
        database_url,
        client,
        jobs,
        task_queue=task_queue,
        now=datetime.now(UTC),
        start=start,
        end=end,
        settle=timedelta(0),
        states=states,
        known=known,
    )


async def audited(
    client: Client,
    database_url: str,
    task_queue: str,
    jobs: Sequence[Any],
    *,
    start: datetime,
    end: datetime | None = None,
    every_fire_time: bool = False,
    timeout: float = 30.0,
    known: Sequence[Any] = (),
) -> AuditReport:
    """Assert the audit of `jobs` over the scheduled times [start, end) finds nothing.

    `every_fire_time`: the test ran each fire time of [start, end) itself (backfilled or
    fired): coverage is judged over the whole window, as if the schedules had fired them.
    Otherwise the jobs' schedules must still exist: a job the catalog pauses (a test's way
    to keep its schedule from firing on its own while it triggers and backfills) is
    recorded paused from its schedule's creation, as `python -m schedules sync` records a
    catalog's pause (tests sync through the library, which records nothing): its fire
    times are not due, and everything else is judged.

    `known`: jobs the audited ones depend on (`depends_on`), not judged themselves.

    Polled, not judged once: a run the test did not wait for (a no-op re-run closing, a
    relay's next round) may still be settling; a real finding stays and fails the test
    after `timeout` seconds, naming every finding.
    """
    states = None
    if every_fire_time:
        if end is None:
            raise ValueError("every_fire_time needs the end of the window the test ran")
        states = {job.id: ScheduleState(True, True, False, timing_since=start) for job in jobs}
    else:
        for job in jobs:
            if job.paused:
                info = (await client.get_schedule_handle(job.id).describe()).info
                await record_pause(database_url, job.id, info.created_at, by="sync", note=job.note)

    async def clean() -> AuditReport:
        report = await audit_report(
            client, database_url, task_queue, jobs, start=start, end=end, states=states, known=known
        )
        assert report.findings == [], "\n".join(
            f"{f.kind} {f.job} {f.slot}: {f.detail} {f.witnesses}" for f in report.findings
        )
        return report

    report = await assert_eventually(clean, timeout=timeout, interval=0.5)
    if every_fire_time:  # judged, not vacuous: the window holds the fire times it ran
        assert all(scope.due > 0 for scope in report.scopes), report.scopes
    return report


async def runtime_audited(
    database_url: str,
    client: Client,
    task_queue: str,
    start: datetime,
    end: datetime,
    *,
    late: timedelta = timedelta(minutes=5),
    now: datetime | None = None,
    catalog: Sequence[Any] = (),
) -> RuntimeAudit:
    """The audit of the runtime schedules over [start, end), as of `now` with no settle
    time: asserts it finds nothing, and returns it. `late`: a test whose dispatcher clock
    is in the past gives a longer one (its runs are claimed days after their slots).
    `catalog`: the catalog jobs runtime schedules depend on."""
    window = Window(start, end, now or datetime.now(UTC), timedelta(0), late, timedelta(minutes=15))
    judged = await audit_runtime(
        database_url, client, window, task_queue=task_queue, timeout=30, catalog=catalog
    )
    assert judged.findings == [], "\n".join(
        f"{f.kind} {f.job} {f.slot}: {f.detail} {f.witnesses}" for f in judged.findings
    )
    return judged
