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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from core.metric_names import (
    ALERT_AFTER,
    LAST_SUCCESS,
    OUTBOX_DEAD,
    OUTBOX_PENDING,
    RUNTIME_BEHIND,
    RUNTIME_DEFERRED,
    RUNTIME_FAILING,
)
from core.sql import queries
from jobs import runtime_kinds

logger = logging.getLogger(__name__)

_Q = queries("worker.sql", "gauges")

# Each gauge and what it reports (Prometheus' HELP).
DESCRIPTIONS = {
    OUTBOX_PENDING: "Outbox messages waiting for delivery.",
    OUTBOX_DEAD: "Outbox messages given up on.",
    LAST_SUCCESS: "Unix time of the job's last completed run, from job_executions.",
    ALERT_AFTER: "How long after its last success the job's next one is overdue.",
    RUNTIME_BEHIND: "Runtime schedules of a kind whose next slot is overdue by 5 minutes.",
    RUNTIME_FAILING: "Runtime schedules of a kind whose last run failed.",
    RUNTIME_DEFERRED: "Runtime schedules of a kind whose due slot a tenant limit defers.",
}


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
    # runtime kind -> schedules whose due slot their tenant's limit defers (issue 40)
    runtime_deferred: dict[str, int] = field(default_factory=dict)

    def observations(self) -> dict[str, list[Observation]]:
        """What each gauge reports of this reading, by name. The per-kind gauges report
        every declared runtime kind, 0 when none of its schedules counts, so an alert tells
        0 from absent."""
        kinds = dict.fromkeys(runtime_kinds(), 0)
        return {
            OUTBOX_PENDING: [Observation(self.outbox_pending)],
            OUTBOX_DEAD: [Observation(self.outbox_dead)],
            LAST_SUCCESS: _labelled("job", self.last_success),
            ALERT_AFTER: _labelled("job", self.alert_after),
            RUNTIME_BEHIND: _labelled("kind", kinds | self.runtime_behind),
            RUNTIME_FAILING: _labelled("kind", kinds | self.runtime_failing),
            RUNTIME_DEFERRED: _labelled("kind", kinds | self.runtime_deferred),
        }


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
        for name, description in DESCRIPTIONS.items():
            meter.create_observable_gauge(
                name, callbacks=[self._callback(name)], description=description
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
        pending, dead, last_success, alert_after, behind, failing, deferred = self._conn.execute(
            _Q["gauges"]
        ).fetchone()
        return Reading(
            int(pending),
            int(dead),
            {k: float(v) for k, v in last_success.items()},
            {k: float(v) for k, v in alert_after.items()},
            {k: int(v) for k, v in behind.items()},
            {k: int(v) for k, v in failing.items()},
            {k: int(v) for k, v in deferred.items()},
        )

    def _callback(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        """Gauge `name`'s callback: none while the database is away."""

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            reading = self.read()
            return reading.observations()[name] if reading else []

        return observe


def _labelled(label: str, values: dict[str, Any]) -> list[Observation]:
    return [Observation(value, {label: key}) for key, value in sorted(values.items())]


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
