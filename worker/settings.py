"""Process configuration, read once from environment variables at start-up."""

from __future__ import annotations

import ipaddress
import math
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Literal, TypeVar

import httpx
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core import redact
from core.errors import SettingsError
from core.queues import QUEUES, task_queue

LOCAL_DATABASE_URL = "postgresql://postgres@127.0.0.1:55432/scheduled_jobs"


class Settings(BaseSettings):
    """Every knob of the worker and the operator CLI.

    Names follow Temporal's own environment variables, plus ``DATABASE_URL``. Defaults
    match the embedded local stack that ``make run`` starts.
    """

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    temporal_task_queue: str = "scheduled-jobs"
    temporal_api_key: SecretStr | None = None
    temporal_tls: bool = False
    temporal_tls_client_cert_path: Path | None = None
    temporal_tls_client_key_path: Path | None = None
    temporal_tls_server_ca_cert_path: Path | None = None

    database_url: SecretStr = SecretStr(LOCAL_DATABASE_URL)
    # `python -m worker migrate` only: the application role it creates and grants rows to
    # (worker/app_role.py), for the workers to connect as instead of the owner.
    app_database_role: str | None = None
    app_database_password: SecretStr | None = None
    database_pool_size: int = Field(default=10, ge=1, le=200)
    # libpq's connect_timeout for the worker's connections (unless DATABASE_URL sets its
    # own): a server that accepts TCP and never answers must not hold a starting worker for
    # psycopg's default of 130 s. The CLI's reads use 5 s too.
    database_connect_timeout_seconds: int = Field(default=5, ge=2, le=600)
    # A paused or partitioned worker must not hold row locks forever: Postgres ends its
    # session once it sits this long inside a transaction, and a newer attempt takes over.
    database_idle_in_transaction_timeout_seconds: float = Field(default=60.0, gt=0)

    worker_graceful_shutdown_seconds: float = Field(default=30.0, ge=0)
    # Temporal's own default. A run's activity starts on the worker that completed its
    # workflow task, without a round trip through the server's matching (eager start), only
    # while a slot is free: at 20, a burst of fire times sent close to half of the runs'
    # activities through matching again (docs/architecture.md, The cost of one run).
    # Activities beyond DATABASE_POOL_SIZE wait for a connection in the pool, in order.
    worker_max_concurrent_activities: int = Field(default=100, ge=1)
    # Temporal's own defaults; a test of slot dependencies runs a worker of one of each,
    # caching no workflow (no sticky queue: its one poller polls the task queue alone).
    worker_max_concurrent_workflow_tasks: int = Field(default=100, ge=1)
    worker_max_concurrent_local_activities: int = Field(default=100, ge=1)
    worker_max_cached_workflows: int = Field(default=1000, ge=0)
    worker_identity: str | None = None
    # Which of the fleet's task queues this worker serves (core/queues.py):
    # `jobs`, every job's runs (TEMPORAL_TASK_QUEUE); `dispatch`, the runtime schedules'
    # dispatchers only (`<TEMPORAL_TASK_QUEUE>-dispatch`), so a herd's work never starves
    # the ticks; `all`, both, in one process (a small deployment, the tests).
    worker_role: Literal["all", "jobs", "dispatch"] = "all"
    migrate_on_start: bool = True
    # `python -m schedules`: the user's catalog file, when `--catalog` does not name one
    # (default: the packaged schedules/jobs.toml, the reference catalog). The engine's own
    # jobs (schedules/engine.toml) are read beside it whatever it is (docs/catalog.md).
    schedules_catalog: Path | None = None
    # `python -m schedules backfill` starts at most this many runs without --yes.
    backfill_max_runs: int = Field(default=50, ge=1)
    # `python -m schedules sync` holds the namespace's sync lock at most this long: the
    # lease a crashed sync leaves behind runs out after it (schedules/server/sync_lock.py).
    sync_lock_seconds: float = Field(default=300.0, ge=30, le=3600)
    # Runtime schedules (schedules/tenants/quota.py): how many one tenant may keep, and the
    # shortest period between two fire times (60: every minute is allowed).
    tenant_max_schedules: int = Field(default=1000, ge=1, le=10_000_000)
    tenant_min_period_seconds: int = Field(default=60, ge=60, le=366 * 86400)
    # The dispatcher's default limits per tenant (issue 40; docs/runtime-schedules.md,
    # Tenant limits): runs in flight, slots started per minute. Unset: no limit. A tenant's
    # own limits (`schedules tenants limits set`) override them.
    runtime_tenant_max_in_flight: int | None = Field(default=None, ge=1)
    runtime_tenant_max_per_minute: int | None = Field(default=None, ge=1)
    # The runtime schedules' dispatch shards (issue 40; activities/runtime/shards.py): one
    # dispatcher job each. `schedules sync` makes a change live without a slot lost or run
    # twice (schedules/sync/shards.py); a divisor of the 16 buckets.
    runtime_dispatch_shards: Literal[1, 2, 4, 8, 16] = 4
    # Tests only (activities/chunks/gate.py): chunked work waits before each chunk while a
    # session holds this PostgreSQL advisory lock. Never set in production.
    worker_test_chunk_gate: int | None = None

    # Telemetry (worker/telemetry.py): a Prometheus scrape endpoint on this port, off when
    # unset; log lines as text or JSON. Trace export follows the standard OTEL_* variables.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    log_format: Literal["text", "json"] = "text"

    # Outbox relay (jobs/outbox_relay/activities.py, the `outbox-relay` job). Email types go over SMTP,
    # by default to the local stack's mail sink; every other type is POSTed to WEBHOOK_URL,
    # and waits in the outbox while it is unset.
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(default=8025, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_from: str = "Billing <billing@scheduled-jobs.localhost>"
    smtp_starttls: bool = False
    smtp_tls: bool = False
    smtp_timeout_seconds: float = Field(default=30.0, gt=0)
    webhook_url: SecretStr | None = None
    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    outbox_email_types: str = (
        "InvoiceReminder,PaymentReceipt,WeeklyReport"  # comma-separated message types
    )
    outbox_message_id_domain: str | None = None  # default: SMTP_FROM's domain
    outbox_batch_size: int = Field(default=100, ge=1, le=10_000)
    outbox_concurrency: int = Field(default=10, ge=1, le=500)
    outbox_lease_seconds: float = Field(default=120.0, ge=10)
    outbox_max_attempts: int = Field(default=12, ge=1)
    outbox_backoff_base_seconds: float = Field(default=5.0, gt=0)
    outbox_backoff_max_seconds: float = Field(default=3600.0, gt=0)

    # Payment provider (the `monthly-billing` job's charges API), by default the local
    # stack's provider. The key is sent as a bearer token and never printed.
    payments_url: str = "http://127.0.0.1:8090"
    payments_api_key: SecretStr | None = None
    payments_timeout_seconds: float = Field(default=10.0, gt=0)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr) -> SecretStr:
        # No value in any message: the URL may hold a password.
        url = value.get_secret_value()
        if not url.startswith(("postgresql://", "postgres://")) and "=" not in url:
            raise ValueError("must be a postgresql:// URL or a libpq key=value string")
        try:
            options = conninfo_to_dict(url)
        except psycopg.Error as exc:  # libpq's reason, which may quote the URL: scrubbed
            reason = redact.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
            raise ValueError(
                f"is not a valid PostgreSQL connection string ({_unquoted(reason, url)})"
            ) from None
        for port in str(options.get("port") or "5432").split(","):
            if not port.isdigit() or not 1 <= int(port) <= 65535:
                raise ValueError("has a port that is not a number from 1 to 65535")
        return value

    @field_validator(
        "database_idle_in_transaction_timeout_seconds",
        "worker_graceful_shutdown_seconds",
        "smtp_timeout_seconds",
        "webhook_timeout_seconds",
        "outbox_lease_seconds",
        "outbox_backoff_base_seconds",
        "outbox_backoff_max_seconds",
        "sync_lock_seconds",
    )
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number of seconds, got {value}")
        return value

    def task_queues(self) -> list[str]:
        """The task queues this worker serves (WORKER_ROLE), the fleet's own first."""
        queues = QUEUES if self.worker_role == "all" else (self.worker_role,)
        return [task_queue(self.temporal_task_queue, q) for q in queues]

    @field_validator("temporal_namespace", "temporal_task_queue")
    @classmethod
    def _temporal_name(cls, value: str) -> str:
        # Temporal refuses names longer than its limit.maxIDLength (1,000 by default).
        if not value.strip() or len(value.encode()) > 1000 or value != value.strip():
            raise ValueError(
                f"must be a non-empty name of at most 1000 bytes without surrounding spaces, "
                f"got {value[:80]!r}"
            )
        return value

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator(
        "smtp_username", "smtp_password", "webhook_url", "outbox_message_id_domain", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("*", mode="before")
    @classmethod
    def _utf8(cls, value: object) -> object:
        # An environment value that is not UTF-8 reaches Python with its bad bytes as lone
        # surrogates: refused here, not when a request or a log line first encodes it.
        if isinstance(value, str):
            try:
                value.encode()
            except UnicodeEncodeError:
                raise ValueError("is not valid UTF-8 text") from None  # no value: may be secret
        return value

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not _is_http_url(value.get_secret_value()):
            # No value in the message: the URL may hold a token.
            raise ValueError("must be an http:// or https:// URL with a host")
        return value

    @field_validator("payments_url")
    @classmethod
    def _payments_url(cls, value: str) -> str:
        if not _is_http_url(value):
            raise ValueError(f"must be an http:// or https:// URL with a host, got {value[:80]!r}")
        return value

    @property
    def outbox_email_type_set(self) -> frozenset[str]:
        """The message types delivered by email (`OUTBOX_EMAIL_TYPES`)."""
        return frozenset(t.strip() for t in self.outbox_email_types.split(",") if t.strip())

    @field_validator("temporal_address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"must be host:port with a port from 1 to 65535, got {value!r}")
        if not _valid_host(host):
            raise ValueError(f"must be host:port with a valid host name or IP, got {value!r}")
        return value

    @property
    def graceful_shutdown(self) -> timedelta:
        return timedelta(seconds=self.worker_graceful_shutdown_seconds)

    @property
    def database_conninfo(self) -> str:
        """`DATABASE_URL` with `DATABASE_CONNECT_TIMEOUT_SECONDS` as libpq's connect_timeout,
        unless the URL sets its own. A secret, like the URL."""
        url = self.database_url.get_secret_value()
        if "connect_timeout" in conninfo_to_dict(url):
            return url
        return make_conninfo(url, connect_timeout=self.database_connect_timeout_seconds)

    @property
    def database_address(self) -> str:
        """Where `DATABASE_URL` points, `host:port` (each, for several hosts), for messages:
        no user, no password."""
        options = conninfo_to_dict(self.database_url.get_secret_value())
        hosts = str(options.get("host") or "localhost").split(",")
        ports = str(options.get("port") or "5432").split(",")
        ports = ports * len(hosts) if len(ports) == 1 else ports
        return ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))


S = TypeVar("S", bound=Settings)

_SECRET_FIELDS = {
    "database_url",
    "temporal_api_key",
    "smtp_password",
    "webhook_url",
    "app_database_password",
}
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_-]{1,63})*\.?$"
)


def _is_http_url(text: str) -> bool:
    """An absolute http(s) URL with a host, as httpx (which sends the requests) reads it."""
    if any(c.isspace() for c in text):
        return False
    try:
        url = httpx.URL(text)
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    port_ok = url.port is None or 1 <= url.port <= 65535
    return url.scheme in ("http", "https") and bool(url.host) and port_ok


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(host))


def _unquoted(reason: str, url: str) -> str:
    """libpq's reason without the connection string it quotes (`in URI: "..."`)."""
    return reason.replace(url, "DATABASE_URL").rstrip(": ") or "unreadable"


def register_secrets(environ: dict[str, str] | None = None) -> None:
    """Tell `core.redact` the secrets this process is configured with, from the raw
    environment: even a malformed value is scrubbed from what is logged or printed."""
    env = {k.upper(): v for k, v in (os.environ if environ is None else environ).items()}
    redact.add_password_of(env.get("DATABASE_URL"))
    redact.add_secret(env.get("SMTP_PASSWORD"))
    redact.add_secret(env.get("APP_DATABASE_PASSWORD"))
    redact.add_secret(env.get("TEMPORAL_API_KEY"))
    redact.add_url_secrets(env.get("WEBHOOK_URL"))


def load_settings(cls: type[S] = Settings) -> S:  # type: ignore[assignment]
    """Read the settings from the environment, or raise one readable `SettingsError`.

    The error names each bad variable and, except for secrets, its value (at most 200
    characters of it). The secrets are registered with `core.redact` first. `cls`: a
    process's own settings on top of these (the API's, `api.settings`).
    """
    register_secrets()
    try:
        return cls()
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            message = err["msg"].removeprefix("Value error, ")
            value = _short(err.get("input"))
            shown = "" if field in _SECRET_FIELDS or value in message else f" (got {value})"
            problems.append(redact.scrub(f"{field.upper()}: {message}{shown}"))
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
