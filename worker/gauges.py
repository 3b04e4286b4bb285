"""Gauges read from PostgreSQL when Prometheus scrapes: outbox backlog and last successes.

These describe the shared database, not one process, so they are read, not counted: every
replica reports the same values (alert on `max by (job)`), and a restarted worker reports
them at once. One query serves all three gauges and is reused for `max_age` seconds, so a
replica queries at most once per `max_age` however often it is scraped. The counts read
indexes only; right after a burst of new outbox rows (before autovacuum marks their pages
all-visible) a count also checks each new row's visibility, which is what bounds it: about
0.3-0.8 s for a million fresh pending messages, 30 ms once vacuumed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from core import metric_names
from core.sql import queries
from jobs import runtime_kinds

logger = logging.getLogger(__name__)

_Q = queries("worker.sql", "gauges")


@dataclass(frozen=True)
class Reading:
    outbox_pending: int
    outbox_dead: int
    # job name -> Unix time of its last completed run
    last_success: dict[str, float] = field(default_factory=dict)
    # job name -> seconds after its last success that the next one is overdue
    alert_after: dict[str, float] = field(default_factory=dict)
    # runtime kind -> schedules behind (next slot overdue) / failing (last run failed)
    runtime_behind: dict[str, int] = field(default_factory=dict)
    runtime_failing: dict[str, int] = field(default_factory=dict)


class DatabaseGauges:
    """Observable gauges backed by one cached query on a dedicated connection."""

    def __init__(self, conninfo: str, max_age: float = 15.0, timeout: float = 5.0) -> None:
        self._conninfo = conninfo
        self._max_age = max_age
        self._timeout = timeout
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        self._reading: Reading | None = None
        self._read_at = float("-inf")

    def register(self, meter: Meter) -> None:
        """Create the gauges on `meter`; they query the database when collected."""
        meter.create_observable_gauge(
            metric_names.OUTBOX_PENDING,
            callbacks=[self._observe_pending],
            description="Outbox messages waiting for delivery.",
        )
        meter.create_observable_gauge(
            metric_names.OUTBOX_DEAD,
            callbacks=[self._observe_dead],
            description="Outbox messages given up on.",
        )
        meter.create_observable_gauge(
            metric_names.LAST_SUCCESS,
            callbacks=[self._observe_last_success],
            description="Unix time of the job's last completed run, from job_executions.",
        )
        meter.create_observable_gauge(
            metric_names.ALERT_AFTER,
            callbacks=[self._observe_alert_after],
            description="How long after its last success the job's next one is overdue.",
        )
        meter.create_observable_gauge(
            metric_names.RUNTIME_BEHIND,
            callbacks=[self._observe_runtime(lambda r: r.runtime_behind)],
            description="Runtime schedules of a kind whose next slot is overdue by 5 minutes.",
        )
        meter.create_observable_gauge(
            metric_names.RUNTIME_FAILING,
            callbacks=[self._observe_runtime(lambda r: r.runtime_failing)],
            description="Runtime schedules of a kind whose last run failed.",
        )

    def read(self) -> Reading | None:
        """The current values, at most `max_age` seconds old; None if the database is away."""
        with self._lock:
            if time.monotonic() - self._read_at < self._max_age:
                return self._reading
            try:
                self._reading = self._query()
            except psycopg.Error as exc:
                logger.warning("metrics: cannot read the database gauges: %s", _first_line(exc))
                self._reading = None
                self.close()
            self._read_at = time.monotonic()
            return self._reading

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _query(self) -> Reading:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=max(1, int(self._timeout)),
                # A monitoring query must not take every core from the jobs it watches.
                options=f"-c statement_timeout={int(self._timeout * 1000)} "
                "-c max_parallel_workers_per_gather=0",
                application_name="scheduled-jobs-metrics",
            )
        pending, dead, last_success, alert_after, behind, failing = self._conn.execute(
            _Q["gauges"]
        ).fetchone()
        return Reading(
            int(pending),
            int(dead),
            {k: float(v) for k, v in last_success.items()},
            {k: float(v) for k, v in alert_after.items()},
            {k: int(v) for k, v in behind.items()},
            {k: int(v) for k, v in failing.items()},
        )

    def _observe_pending(self, _options: CallbackOptions) -> Iterable[Observation]:
        reading = self.read()
        return [Observation(reading.outbox_pending)] if reading else []

    def _observe_dead(self, _options: CallbackOptions) -> Iterable[Observation]:
        reading = self.read()
        return [Observation(reading.outbox_dead)] if reading else []

    def _observe_last_success(self, _options: CallbackOptions) -> Iterable[Observation]:
        reading = self.read()
        if not reading:
            return []
        return [Observation(at, {"job": job}) for job, at in sorted(reading.last_success.items())]

    def _observe_runtime(self, pick: Any) -> Any:
        """A callback for a per-kind runtime gauge (labelled by kind only)."""
        return _observe_runtime_of(self, pick)

    def _observe_alert_after(self, _options: CallbackOptions) -> Iterable[Observation]:
        reading = self.read()
        if not reading:
            return []
        return [Observation(s, {"job": job}) for job, s in sorted(reading.alert_after.items())]


def _observe_runtime_of(gauges: DatabaseGauges, pick: Any) -> Any:
    """A per-kind gauge's callback: every declared runtime kind is reported, 0 when none of
    its schedules is behind (or failing), so an alert tells 0 from absent."""

    def observe(_options: CallbackOptions) -> Iterable[Observation]:
        reading = gauges.read()
        if not reading:
            return []
        counts = dict.fromkeys(runtime_kinds(), 0) | pick(reading)
        return [Observation(n, {"kind": kind}) for kind, n in sorted(counts.items())]

    return observe


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
