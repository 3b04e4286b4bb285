"""The outbox relay: deliver `outbox_messages` at least once, deduplicated by message id.

One batch is three short steps, and no transaction stays open while a message is on the wire:

1. *Claim* (one committed statement): up to `batch_size` due messages, `FOR UPDATE SKIP
   LOCKED`, get a lease: `next_attempt_at` moves `lease_seconds` ahead and the batch's
   `claim_token` is stamped. Any number of relays claim side by side and never get the
   same message while its lease lasts.
2. *Deliver* outside any transaction, `concurrency` at a time, through the message type's
   transport (`jobs.outbox_relay.transports`), before the lease runs out.
3. *Record* (one transaction): delivered messages get `dispatched_at`; failed ones get
   `attempts + 1`, `last_error` and an exponential backoff, or `dead_at` when the failure is
   permanent or the last allowed attempt; unstarted ones are released, due at once.

A relay that dies between 1 and 3 holds no lock and loses nothing: its messages come due
again when the lease ends, and another relay delivers them (again, if the first had sent
them: the receiver deduplicates by `Message-ID` / `Idempotency-Key`).

`RelayActivities.relay_outbox` runs a relay as the `outbox-relay` scheduled job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.chunks.chunked import begin_attempt, fenced
from activities.claim.executions import holder_name
from activities.common.models import WorkInput, WorkResult
from activities.common.telemetry import record_completed
from activities.outbox.notices import NOTICE_EMAIL, NOTICE_TYPES, NOTICE_WEBHOOK
from core.sql import queries
from core.wakeups import OUTBOX_DUE, Wakeups, session_end
from jobs.outbox_relay.notices import NoticeWebhookTransport
from jobs.outbox_relay.transports import (
    DeliveryError,
    OutboxMessage,
    SmtpConfig,
    SmtpTransport,
    Transport,
    WebhookConfig,
    WebhookTransport,
)

logger = logging.getLogger(__name__)

_Q = queries(__package__, "queries")

# Deliveries of a batch must end this long before its lease does, so a slow batch is
# recorded (as failed) before another relay may claim the same messages.
LEASE_MARGIN_SECONDS = 5.0
# A relay run saves its counts (and checks its fencing token) at most this often.
CHECKPOINT_SECONDS = 1.0


@dataclass(frozen=True)
class RelayConfig:
    """How a relay claims, delivers and retries; read from the settings (`from_settings`)."""

    smtp: SmtpConfig
    webhook: WebhookConfig | None = None  # unset: webhook-type messages wait, unclaimed
    email_types: frozenset[str] = frozenset({"InvoiceReminder"})
    batch_size: int = 100
    concurrency: int = 10
    lease_seconds: float = 120.0
    max_attempts: int = 12
    backoff_base_seconds: float = 5.0
    backoff_max_seconds: float = 3600.0

    @classmethod
    def from_settings(cls, settings: Any) -> RelayConfig:
        """The relay part of `worker.settings.Settings`: each field is the setting of the
        same name after its prefix (`SMTP_PORT` is the SMTP client's `port`,
        `OUTBOX_BATCH_SIZE` the relay's `batch_size`), but for the sender (`SMTP_FROM`), the
        Message-ID domain and the email types."""
        webhook = None
        if settings.webhook_url is not None:
            webhook = WebhookConfig(**_prefixed(settings, "webhook_", ("url", "timeout_seconds")))
        return cls(
            smtp=SmtpConfig(
                sender=settings.smtp_from,
                message_id_domain=settings.outbox_message_id_domain,
                **_prefixed(settings, "smtp_", _SMTP_SETTINGS),
            ),
            webhook=webhook,
            email_types=settings.outbox_email_type_set,
            **_prefixed(settings, "outbox_", _RELAY_SETTINGS),
        )


_SMTP_SETTINGS = ("host", "port", "username", "password", "starttls", "tls", "timeout_seconds")
_RELAY_SETTINGS = (
    "batch_size",
    "concurrency",
    "lease_seconds",
    "max_attempts",
    "backoff_base_seconds",
    "backoff_max_seconds",
)


def _prefixed(settings: Any, prefix: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The settings named `prefix` + each of `names`, by name."""
    return {name: getattr(settings, prefix + name) for name in names}


@dataclass
class RelayCounts:
    """What a relay did: counts only, the result a workflow's history carries."""

    batches: int = 0
    claimed: int = 0
    delivered: int = 0
    retried: int = 0  # failed, due again after a backoff
    dead: int = 0
    released: int = 0  # claimed, not attempted (the relay stopped)

    def add(self, other: RelayCounts) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class _Batch:
    token: UUID
    messages: list[OutboxMessage]
    started: set[UUID] = field(default_factory=set)
    outcomes: dict[UUID, DeliveryError | None] = field(default_factory=dict)


class Relay:
    """Claims and delivers outbox messages; use as `async with Relay(pool, config) as r`."""

    def __init__(
        self, pool: AsyncConnectionPool, config: RelayConfig, holder: str | None = None
    ) -> None:
        self.pool = pool
        self.config = config
        self.holder = holder or holder_name()
        self._slots = asyncio.Semaphore(config.concurrency)
        self._email: Transport | None = None
        self._webhook: Transport | None = None
        self._notices: Transport | None = None

    async def __aenter__(self) -> Relay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for transport in self._transports:
            if transport is not None:
                await transport.close()
        self._email = self._webhook = self._notices = None

    @property
    def _transports(self) -> tuple[Transport | None, ...]:
        return (self._email, self._webhook, self._notices)

    @property
    def only_types(self) -> list[str] | None:
        """The types this relay may claim: all, or without a webhook only email types and
        notices (which go to each tenant's own webhook)."""
        if self.config.webhook is not None:
            return None
        return sorted(self.config.email_types | NOTICE_TYPES)

    def _transport(self, message_type: str) -> Transport:
        config = self.config
        if message_type == NOTICE_WEBHOOK:
            if self._notices is None:
                self._notices = NoticeWebhookTransport(self.pool, config.concurrency)
            return self._notices
        if message_type in config.email_types or message_type == NOTICE_EMAIL:
            if self._email is None:
                self._email = SmtpTransport(config.smtp, config.concurrency)
            return self._email
        if config.webhook is None:  # not claimed in the first place; kept as a guard
            raise DeliveryError(f"no transport for {message_type}: WEBHOOK_URL is unset")
        if self._webhook is None:
            self._webhook = WebhookTransport(config.webhook, config.concurrency)
        return self._webhook

    async def waiting_without_transport(self) -> int:
        """Due messages no transport here can take (webhook types while WEBHOOK_URL is unset)."""
        if self.config.webhook is not None:
            return 0
        async with self.pool.connection() as conn:
            cur = await conn.execute(_Q["waiting"], {"types": self.only_types})
            return sum(n for _, n in await cur.fetchall())

    async def seconds_until_due(self) -> float | None:
        """How long until the next message this relay may claim is due (None: none waits)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(_Q["seconds_until_due"], {"only_types": self.only_types})
            row = await cur.fetchone()
        return None if row is None else row[0]

    async def run_batch(self, batch_size: int | None = None) -> RelayCounts:
        """Claim, deliver and record one batch; zero `claimed` means nothing was due."""
        batch = await self._claim(batch_size or self.config.batch_size)
        if not batch.messages:
            return RelayCounts()
        for transport in self._transports:
            if transport is not None:
                transport.begin_batch()
        deadline = max(self.config.lease_seconds - LEASE_MARGIN_SECONDS, 1.0)
        try:
            async with asyncio.timeout(deadline):
                await asyncio.gather(*(self._deliver(batch, m) for m in batch.messages))
        except TimeoutError:
            # Started and unfinished: maybe sent, unknown; a failed attempt, retried later.
            for message_id in batch.started - batch.outcomes.keys():
                batch.outcomes[message_id] = DeliveryError(
                    f"delivery did not finish within the batch deadline of {deadline:.0f}s"
                )
        finally:
            # Also when cancelled: record what is known, so nothing waits for the lease.
            counts = await asyncio.shield(self._record(batch))
        return counts

    async def drain(
        self,
        max_seconds: float,
        batch_size: int | None = None,
        on_batch: Callable[[RelayCounts], Awaitable[None]] | None = None,
        poll_seconds: float = 0.0,
        stopping: Callable[[], bool] = lambda: False,
        idle: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> RelayCounts:
        """Run batches for up to `max_seconds` and return the totals.

        When nothing is due: return at once, or with `poll_seconds` look again after
        `idle(poll_seconds)` (a sleep, or a wait a write may end early) until the time is
        up. `stopping()` true ends it early (worker shutdown). Both are checked between
        batches: a batch on the wire always finishes and is recorded.
        """
        totals = RelayCounts()
        deadline = time.monotonic() + max_seconds
        while (left := deadline - time.monotonic()) > 0 and not stopping():
            counts = await self.run_batch(batch_size)
            if counts.claimed:
                totals.add(counts)
                if on_batch is not None:
                    await on_batch(totals)
            elif poll_seconds > 0:
                await idle(min(poll_seconds, left))
            else:
                break
        return totals

    async def _claim(self, limit: int) -> _Batch:
        token = uuid4()
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                _Q["claim"],
                {
                    "only_types": self.only_types,
                    "limit": limit,
                    "lease_seconds": self.config.lease_seconds,
                    "token": token,
                    "holder": self.holder,
                },
            )
            rows = await cur.fetchall()
        return _Batch(token, [OutboxMessage(*row) for row in rows])

    async def _deliver(self, batch: _Batch, message: OutboxMessage) -> None:
        async with self._slots:
            batch.started.add(message.id)
            try:
                await self._transport(message.type).send(message)
            except DeliveryError as exc:
                batch.outcomes[message.id] = exc
            except Exception as exc:  # a bug or an unforeseen library error: retry later
                logger.exception("outbox message %s: unexpected delivery error", message.id)
                batch.outcomes[message.id] = DeliveryError(
                    f"unexpected error: {type(exc).__name__}: {exc}"
                )
            else:
                batch.outcomes[message.id] = None

    async def _record(self, batch: _Batch) -> RelayCounts:
        delivered = [i for i, err in batch.outcomes.items() if err is None]
        failed = [(i, err) for i, err in batch.outcomes.items() if err is not None]
        unstarted = [m.id for m in batch.messages if m.id not in batch.outcomes]
        types = {m.id: m.type for m in batch.messages}
        config = self.config
        async with self.pool.connection() as conn, conn.transaction():
            if delivered:
                await conn.execute(_Q["mark_dispatched"], {"ids": delivered})
            dead: list[UUID] = []
            if failed:
                cur = await conn.execute(
                    _Q["mark_failed"],
                    {
                        "ids": [i for i, _ in failed],
                        "errors": [str(err) for _, err in failed],
                        "permanent": [err.permanent for _, err in failed],
                        "token": batch.token,
                        "max_attempts": config.max_attempts,
                        "backoff_base": config.backoff_base_seconds,
                        "backoff_max": config.backoff_max_seconds,
                    },
                )
                dead = [row[0] for row in await cur.fetchall() if row[1]]
            if unstarted:
                await conn.execute(_Q["release"], {"ids": unstarted, "token": batch.token})
        for message_id in dead:
            # The error text stays in the database: it may name a customer's address.
            logger.warning(
                "outbox message %s (%s) is dead",
                message_id,
                types[message_id],
                extra={"message_id": str(message_id), "message_type": types[message_id]},
            )
        counts = RelayCounts(
            batches=1,
            claimed=len(batch.messages),
            delivered=len(delivered),
            retried=len(failed) - len(dead),
            dead=len(dead),
            released=len(unstarted),
        )
        logger.debug("outbox batch relayed", extra=counts.as_dict())
        return counts


class RelayParams(BaseModel):
    """The `outbox-relay` job's typed input, set in its catalog entry."""

    # Stop claiming new batches after this long; keep it under the schedule's interval, so
    # the next fire finds the run finished.
    max_seconds: float = Field(default=25.0, gt=0, le=24 * 3600)
    # While nothing is due, look again this often until max_seconds; 0: end the run.
    poll_seconds: float = Field(default=1.0, ge=0, le=600)
    # A session (issue 43): while nothing is due, sleep until the next message is due or a
    # write wakes the relay (migration 0036, `core.wakeups`), `poll_seconds` at most; and
    # end before the job's next fire time, however long `max_seconds`.
    wake: bool = False
    # Messages per claim; unset: OUTBOX_BATCH_SIZE.
    batch_size: int | None = Field(default=None, ge=1, le=10_000)


class RelayActivities:
    """The relay as a scheduled job's work activity; built by the worker with its pool and
    its settings (`worker.settings.Settings`), read once at start-up."""

    def __init__(self, pool: AsyncConnectionPool, settings: Any) -> None:
        self.pool = pool
        self.config = RelayConfig.from_settings(settings)

    async def relay_outbox(self, work: WorkInput, params: RelayParams) -> WorkResult:
        """Deliver due outbox messages for up to `max_seconds`, then complete the run.

        Each message's outcome is committed on its own, under its claim, whatever happens to
        this run: the fencing token guards only the run's record (progress and completion),
        so a stale attempt still running beside its successor is simply one more relay, and
        it stops at its next batch.
        """
        execution = work.execution
        fence = await begin_attempt(self.pool, execution)
        if isinstance(fence, WorkResult):
            return fence
        # A retried attempt goes on counting from where the previous one checkpointed.
        saved = fence.progress.get("counts") or {}
        totals = RelayCounts(**{k: v for k, v in saved.items() if k in RelayCounts.__annotations__})
        live = {"counts": totals, "saved_at": 0.0}

        async def checkpoint(run: RelayCounts) -> None:
            live["counts"] = _plus(totals, run)
            if time.monotonic() - live["saved_at"] < CHECKPOINT_SECONDS:
                return
            # Raises StaleAttemptError once a newer attempt owns the run: stop relaying.
            async with fenced(self.pool, fence, execution) as conn:
                await fence.save_progress(conn, {"counts": live["counts"].as_dict()})
            live["saved_at"] = time.monotonic()

        async with (
            Relay(self.pool, self.config) as relay,
            _heartbeating(lambda: live["counts"]),
        ):
            waiting = await relay.waiting_without_transport()
            if waiting:
                activity.logger.warning(
                    "%d outbox message(s) of webhook types wait: WEBHOOK_URL is unset",
                    waiting,
                    extra={"job": execution.job_name},
                )
            run = await self._drain(relay, work, params, checkpoint)
        totals.add(run)
        counts = totals.as_dict() | {"waiting_without_transport": waiting}
        async with fenced(self.pool, fence, execution) as conn:
            duration = await fence.complete(conn, {"counts": counts}, {"counts": counts})
        record_completed(execution.job_name, duration)
        return WorkResult(counts=counts)

    async def _drain(
        self,
        relay: Relay,
        work: WorkInput,
        params: RelayParams,
        checkpoint: Callable[[RelayCounts], Awaitable[None]],
    ) -> RelayCounts:
        """The run's batches: for `max_seconds`, or as a session (`params.wake`) until its
        end, woken by the writes of outbox messages. A session cut short by a worker
        shutdown raises, so that its run goes on in another worker (the retry)."""
        if not params.wake:
            return await relay.drain(
                params.max_seconds,
                params.batch_size,
                checkpoint,
                poll_seconds=params.poll_seconds,
                stopping=activity.is_worker_shutdown,
            )
        end = session_end(work.execution.scheduled_at, work.timing, params.max_seconds)
        async with Wakeups(self.pool.conninfo, OUTBOX_DUE, **(self.pool.kwargs or {})) as wakeups:

            async def idle(most: float) -> None:
                due = await relay.seconds_until_due()
                await wakeups.wait_in_activity(most if due is None else min(most, max(due, 0.0)))

            run = await relay.drain(
                max((end - datetime.now(UTC)).total_seconds(), 0.0),
                params.batch_size,
                checkpoint,
                poll_seconds=params.poll_seconds,
                stopping=activity.is_worker_shutdown,
                idle=idle,
            )
        if activity.is_worker_shutdown() and datetime.now(UTC) < end:
            await checkpoint(run)
            raise ApplicationError("worker shutting down: the session goes on elsewhere")
        return run


def _plus(a: RelayCounts, b: RelayCounts) -> RelayCounts:
    total = RelayCounts(**a.as_dict())
    total.add(b)
    return total


@contextlib.asynccontextmanager
async def _heartbeating(details: Callable[[], RelayCounts]):
    """Heartbeat every few seconds while a batch is on the wire, so Temporal sees the
    activity alive and can deliver a cancellation (the batch then records what it knows)."""
    timeout = activity.info().heartbeat_timeout
    every = min(timeout.total_seconds() / 3, 5.0) if timeout else 5.0

    async def beat() -> None:
        while True:
            activity.heartbeat(details().as_dict())
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
