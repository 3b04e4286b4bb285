"""Process configuration, read once from environment variables at start-up."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from worker.errors import SettingsError

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
    database_pool_size: int = Field(default=10, ge=1, le=200)
    # A paused or partitioned worker must not hold row locks forever: Postgres ends its
    # session once it sits this long inside a transaction, and a newer attempt takes over.
    database_idle_in_transaction_timeout_seconds: float = Field(default=60.0, gt=0)

    worker_graceful_shutdown_seconds: float = Field(default=30.0, ge=0)
    worker_max_concurrent_activities: int = Field(default=20, ge=1)
    worker_identity: str | None = None
    migrate_on_start: bool = True
    # `python -m schedules backfill` starts at most this many runs without --yes.
    backfill_max_runs: int = Field(default=50, ge=1)
    # Tests only (activities/chunk_gate.py): chunked work waits before each chunk while a
    # session holds this PostgreSQL advisory lock. Never set in production.
    worker_test_chunk_gate: int | None = None

    # Telemetry (worker/telemetry.py): a Prometheus scrape endpoint on this port, off when
    # unset; log lines as text or JSON. Trace export follows the standard OTEL_* variables.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    log_format: Literal["text", "json"] = "text"

    # Outbox relay (activities/relay.py, the `outbox-relay` job). Email types go over SMTP,
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
    outbox_email_types: str = "InvoiceReminder"  # comma-separated message types
    outbox_message_id_domain: str | None = None  # default: SMTP_FROM's domain
    outbox_batch_size: int = Field(default=100, ge=1, le=10_000)
    outbox_concurrency: int = Field(default=10, ge=1, le=500)
    outbox_lease_seconds: float = Field(default=120.0, ge=10)
    outbox_max_attempts: int = Field(default=12, ge=1)
    outbox_backoff_base_seconds: float = Field(default=5.0, gt=0)
    outbox_backoff_max_seconds: float = Field(default=3600.0, gt=0)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr) -> SecretStr:
        url = value.get_secret_value()
        if not url.startswith(("postgresql://", "postgres://")) and "=" not in url:
            # No value in the message: the URL may hold a password.
            raise ValueError("must be a postgresql:// URL or a libpq key=value string")
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

    @field_validator("webhook_url")
    @classmethod
    def _http_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")  # no value: may hold a token
        return value

    @property
    def outbox_email_type_set(self) -> frozenset[str]:
        """The message types delivered by email (`OUTBOX_EMAIL_TYPES`)."""
        return frozenset(t.strip() for t in self.outbox_email_types.split(",") if t.strip())

    @field_validator("temporal_address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"must be host:port, got {value!r}")
        return value

    @property
    def graceful_shutdown(self) -> timedelta:
        return timedelta(seconds=self.worker_graceful_shutdown_seconds)


_SECRET_FIELDS = {"database_url", "temporal_api_key", "smtp_password", "webhook_url"}


def load_settings() -> Settings:
    """Read the settings from the environment, or raise one readable `SettingsError`.

    The error names each bad variable and, except for secrets, its value.
    """
    try:
        return Settings()
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "?"
            shown = "" if field in _SECRET_FIELDS else f" (got {err.get('input')!r})"
            problems.append(f"{field.upper()}: {err['msg']}{shown}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None
