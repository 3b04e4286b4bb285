"""Bad input is refused up front: malformed catalogs, settings and arguments, one table.

Each case runs a real command (`python -m schedules ...` or `python -m worker ...`, in this
process where it can, else as a subprocess) against the real dev server and PostgreSQL,
with secrets in its settings, and must:

- exit with the documented code (2 bad input; 1 a server that cannot be reached);
- print one line (or one per problem) on stderr, `error: ...`, naming the job, field and
  value or the setting, and no traceback;
- print no secret;
- leave Temporal's schedules byte for byte as they were.

The table is data: to add a case, add a `Case` (a cron case of the cron grammar, say).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import redact
from schedules.catalog.model import parse_catalog
from schedules.cli.main import main as schedules_main
from schedules.sync.apply import sync
from tests.helpers import TEMPLATE_DB, python_m
from tests.helpers.worker import settings_env
from tests.integration.schedule_state import snapshot
from worker.__main__ import main as worker_main
from worker.settings import Settings

DB_PASSWORD = "table-DB-pa55word"
SMTP_PASSWORD = "table-SMTP-pa55word"
WEBHOOK_TOKEN = "table-HOOK-t0ken"
SECRETS = (DB_PASSWORD, SMTP_PASSWORD, WEBHOOK_TOKEN)

# The schedules on the server while the table runs; no case may change them.
BASELINE = {"bad-input-a": "0 1 * * *", "bad-input-b": "30 2 * * *"}
GOOD = {"kind": "invoice-reminders", "cron": "0 3 * * *", "timezone": "UTC", "paused": True}
AHEAD = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()


@dataclass(frozen=True)
class Case:
    """One malformed input: the command line after `python -m`, its catalog and settings."""

    name: str
    argv: tuple[str, ...]
    says: tuple[str, ...]  # what its error line must contain (all of it)
    exit: int = 2
    catalog: str | bytes | None = None  # the catalog file's content: `--catalog` is added
    env: dict[str, str | None] = field(default_factory=dict)  # None: not set at all
    lines: int = 1  # problems, one line each
    subprocess: bool = False  # `python -m worker` (run) starts a whole worker: not in-process


def job(**fields) -> str:
    """A catalog of one job, `bad-job`: the good fields with `fields` over them (None drops)."""
    table = {k: v for k, v in (GOOD | fields).items() if v is not None}
    return "[bad-job]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in table.items())


def toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def catalog_case(name: str, says: tuple[str, ...], lines: int = 1, **fields) -> Case:
    return Case(name, ("sync",), says, catalog=job(**fields), lines=lines)


CATALOG_CASES = [
    catalog_case("cron out of range", ("job 'bad-job': cron:", "'61 1 * * *'"), cron="61 1 * * *"),
    catalog_case("cron of three fields", ("job 'bad-job': cron:", "'* * *'"), cron="* * *"),
    catalog_case("unknown zone", ("timezone:", "'Mars/Olympus'"), timezone="Mars/Olympus"),
    catalog_case("empty zone", ("timezone: is not a known IANA time zone: ''",), timezone=""),
    catalog_case(
        "misspelt zone",
        (
            "timezone: is not a known IANA time zone: 'Europe/Londn' (did you mean 'Europe/London'?)",
        ),
        timezone="Europe/Londn",
    ),
    catalog_case(
        "legacy fixed-offset zone",
        (
            "job 'bad-job': timezone: 'EST' is a legacy POSIX zone, not a region's local time:",
            "'America/New_York'; for a fixed offset give 'Etc/GMT+5'",
        ),
        timezone="EST",
    ),
    catalog_case(
        "legacy rule zone",
        ("timezone: 'PST8PDT' is a legacy", "'America/Los_Angeles'"),
        timezone="PST8PDT",
    ),
    catalog_case(
        "zone as a path", ("timezone:", "'../../etc/passwd'"), timezone="../../etc/passwd"
    ),
    catalog_case(
        "very long zone", ("timezone: is not a known IANA time zone",), timezone="Z" * 5000
    ),
    catalog_case("unknown kind", ("kind: unknown job kind 'payroll'",), kind="payroll"),
    catalog_case("no kind", ("job 'bad-job': kind: is required",), kind=None),
    catalog_case("no zone", ("job 'bad-job': timezone: is required",), timezone=None),
    catalog_case("cron and interval", ("cron / interval: give exactly one",), interval="1m"),
    catalog_case("neither cron nor interval", ("cron / interval: give exactly one",), cron=None),
    catalog_case(
        "interval below 1s", ("interval: must be at least 1s",), cron=None, interval="500ms"
    ),
    catalog_case(
        "interval as a word", ("interval: is not a duration", "'soon'"), cron=None, interval="soon"
    ),
    catalog_case(
        "interval as a number",
        ("interval: must be a duration in quotes", "got 30"),
        cron=None,
        interval=30,
    ),
    catalog_case(
        "jitter of a whole period", ("jitter:", "is not shorter than the period"), jitter="1d"
    ),
    catalog_case("jitter true", ("jitter: must be a duration in quotes", "got True"), jitter=True),
    catalog_case(
        "timeout true", ("timeout: must be a duration in quotes", "got True"), timeout=True
    ),
    catalog_case("timeout 0s", ("timeout: must be longer than 0s", "'0s'"), timeout="0s"),
    catalog_case("timeout negative", ("timeout:", "'-5s'"), timeout="-5s"),
    catalog_case("timeout of ages", ("timeout: is longer than 3650d",), timeout="P99999999D"),
    catalog_case("heartbeat 0s", ("heartbeat: must be longer than 0s", "'0s'"), heartbeat="0s"),
    catalog_case(
        "timeout and heartbeat 0s",
        ("must be longer than 0s",),
        lines=3,  # a count, then one line per problem
        timeout="0s",
        heartbeat="0s",
    ),
    catalog_case(
        "heartbeat over timeout", ("heartbeat: 2:00:00 exceeds timeout 1:00:00",), heartbeat="2h"
    ),
    catalog_case(
        "starting deadline 0s",
        ("starting_deadline: must be longer than 0s",),
        starting_deadline="0s",
    ),
    catalog_case("unknown catch-up", ("catchup:", "'sometimes'"), catchup="sometimes"),
    catalog_case(
        "all without max_missed",
        ("max_missed: catchup 'all' needs max_missed >= 1",),
        catchup="all",
    ),
    catalog_case(
        "max_missed 0",
        ("max_missed: catchup 'all' needs max_missed >= 1, got 0",),
        catchup="all",
        max_missed=0,
    ),
    catalog_case(
        "max_missed with latest", ("max_missed: only applies to catchup 'all'",), max_missed=3
    ),
    catalog_case(
        "max_missed too many", ("max_missed: must be at most 1000",), catchup="all", max_missed=5000
    ),
    catalog_case(
        "catch-up window 2s", ("catchup_window: must be at least 10s",), catchup_window="2s"
    ),
    catalog_case(
        "catch-up window of ages",
        ("catchup_window: is longer than 3650d",),
        catchup_window="100000000d",
    ),
    catalog_case("unknown overlap", ("overlap:", "'whenever'"), overlap="whenever"),
    catalog_case(
        "start_at without offset", ("start_at: needs a UTC offset",), start_at="2027-01-01T00:00:00"
    ),
    catalog_case(
        "start_at in year 1",
        ("start_at: must lie in the years 1970 to 2100",),
        start_at="0001-01-01T00:00:00Z",
    ),
    catalog_case(
        "end_at in year 9999",
        ("end_at: must lie in the years 1970 to 2100",),
        end_at="9999-12-31T00:00:00Z",
    ),
    catalog_case(
        "end_at before start_at",
        ("start_at: 2027-02-01 00:00:00+00:00 is not before end_at",),
        start_at="2027-02-01T00:00:00Z",
        end_at="2027-01-01T00:00:00Z",
    ),
    catalog_case(
        "retry maximum below initial",
        ("retry: maximum_interval: 0:00:01 is shorter than initial_interval 0:01:00",),
        retry={"initial_interval": "1m", "maximum_interval": "1s"},
    ),
    catalog_case(
        "retry initial 0s",
        ("retry.initial_interval: must be longer than 0s",),
        retry={"initial_interval": "0s"},
    ),
    catalog_case(
        "retry attempts negative", ("retry.maximum_attempts:", "-1"), retry={"maximum_attempts": -1}
    ),
    catalog_case(
        "retry attempts past int32",
        ("retry.maximum_attempts:", "1099511627776"),
        retry={"maximum_attempts": 2**40},
    ),
    catalog_case(
        "retry backoff below 1",
        ("retry.backoff_coefficient:", "0.5"),
        retry={"backoff_coefficient": 0.5},
    ),
    catalog_case(
        "retry backoff 1000",
        ("retry.backoff_coefficient:", "1000"),
        retry={"backoff_coefficient": 1000},
    ),
    catalog_case(
        "retry unknown key",
        ("retry.colour: Extra inputs are not permitted",),
        retry={"colour": "red"},
    ),
    catalog_case("retry not a table", ("retry:", "'fast'"), retry="fast"),
    catalog_case(
        "mistyped params key",
        ("params.chunk_sise: not a parameter of kind 'invoice-reminders'",),
        params={"chunk_sise": 100},
    ),
    catalog_case(
        "params value 0",
        ("params.chunk_size: Input should be greater than or equal to 1",),
        params={"chunk_size": 0},
    ),
    catalog_case(
        "params value with a semicolon",
        ("params.chunk_size: Input should be a valid integer", "got 'many; really'"),
        params={"chunk_size": "many; really"},
    ),
    catalog_case("params not a table", ("params:", "5"), params=5),
    catalog_case(
        "id inside the table", ("id: is not a setting; the table's name [bad-job]",), id="other-job"
    ),
    catalog_case("unknown setting", ("colour: Extra inputs are not permitted",), colour="blue"),
    catalog_case("paused maybe", ("paused:", "'maybe'"), paused="maybe"),
    catalog_case(
        "description a number", ("description: Input should be a valid string",), description=5
    ),
    catalog_case(
        "alert_grace a word", ("alert_grace: is not a duration", "'soon'"), alert_grace="soon"
    ),
    catalog_case(
        "alert_grace true", ("alert_grace: must be a duration in quotes",), alert_grace=True
    ),
    catalog_case(
        "description of 2 MB",
        ("job 'bad-job': its schedule is 2,00", "largest: description 2,000,002 bytes"),
        description="d" * 2_000_000,
    ),
    catalog_case(
        "owner of 700 kB", ("its schedule is", "largest: owner 700,002 bytes"), owner="o" * 700_000
    ),
    catalog_case(
        "note of 600 kB", ("its schedule is", "largest: note 600,002 bytes"), note="n" * 600_000
    ),
    catalog_case(
        "relay max_seconds 0",
        ("params.max_seconds: Input should be greater than 0",),
        kind="outbox-relay",
        params={"max_seconds": 0},
    ),
    Case(
        "id of 2001 characters",
        ("sync",),
        ("id: is 2001 characters; a job id may have at most 973",),
        catalog=f'["{"x" * 2001}"]\nkind = "invoice-reminders"\ncron = "0 1 * * *"\ntimezone = "UTC"\n',
    ),
    Case(
        "id not kebab-case",
        ("sync",),
        ("job 'Bad_Id': id: must be kebab-case",),
        catalog='[Bad_Id]\nkind = "invoice-reminders"\ncron = "0 1 * * *"\ntimezone = "UTC"\n',
    ),
    Case(
        "id with a space",
        ("sync",),
        ("job 'a b': id: must be kebab-case",),
        catalog='["a b"]\nkind = "invoice-reminders"\ncron = "0 1 * * *"\ntimezone = "UTC"\n',
    ),
    Case(
        "job not a table",
        ("sync",),
        ("job 'bad-job': must be a table of settings, got 5",),
        catalog="bad-job = 5\n",
    ),
    Case(
        "a job twice",
        ("sync",),
        ("is not valid TOML", "Cannot declare ('bad-job',) twice"),
        catalog=job() + "\n" + job(),
    ),
    Case("not TOML", ("sync",), ("is not valid TOML",), catalog="[bad-job\nkind = 1\n"),
    Case(
        "not UTF-8",
        ("sync",),
        ("is not UTF-8 text: byte 0xe9 on line 2",),
        catalog=b'[bad-job]\ndescription = "caf\xe9"\n',
    ),
    Case(
        "validate: a 2 MB description",
        ("validate",),
        ("its schedule is 2,00",),
        catalog=job(description="d" * 2_000_000),
    ),
    Case(
        "validate: heartbeat 0s",
        ("validate",),
        ("heartbeat: must be longer than 0s",),
        catalog=job(heartbeat="0s"),
    ),
    Case(
        "validate: mistyped params key",
        ("validate",),
        ("params.remind_every: not a parameter",),
        catalog=job(params={"remind_every": 3}),
    ),
    Case(
        "no catalog file",
        ("--catalog", "/nonexistent/jobs.toml", "sync"),
        ("cannot read the catalog /nonexistent/jobs.toml",),
    ),
    Case(
        "catalog is a directory",
        ("--catalog", "/tmp", "validate"),
        ("cannot read the catalog /tmp",),
    ),
    Case(
        "an empty catalog",
        ("sync",),
        ("sync refused: it would delete 2 of the 2 schedule(s)", "bad-input-a, bad-input-b"),
        catalog="",
    ),
    Case(
        "a catalog of comments",
        ("sync",),
        ("sync refused", "--max-prune 100"),
        catalog="# moved\n# (none)\n",
    ),
    Case(
        "an empty catalog, dry run",
        ("sync", "--dry-run"),
        ("sync refused", "bad-input-a"),
        catalog="",
    ),
]

MALFORMED_DB = f"postgresql://app:{DB_PASSWORD}@[::1/db"
SETTINGS_CASES = [
    Case(
        "mysql URL: list",
        ("list",),
        ("DATABASE_URL: must be a postgresql:// URL",),
        env={"DATABASE_URL": f"mysql://app:{DB_PASSWORD}@db/jobs"},
    ),
    Case(
        "broken IPv6 URL: list",
        ("list",),
        ("DATABASE_URL: is not a valid PostgreSQL connection string",),
        env={"DATABASE_URL": MALFORMED_DB},
    ),
    Case(
        "broken IPv6 URL: describe",
        ("describe", "bad-input-a"),
        ("DATABASE_URL: is not a valid",),
        env={"DATABASE_URL": MALFORMED_DB},
    ),
    Case(
        "broken IPv6 URL: check",
        ("check",),
        ("DATABASE_URL: is not a valid",),
        env={"DATABASE_URL": MALFORMED_DB},
    ),
    Case(
        "broken IPv6 URL: sync",
        ("sync", "--dry-run"),
        ("DATABASE_URL: is not a valid",),
        env={"DATABASE_URL": MALFORMED_DB},
    ),
    Case(
        "broken IPv6 URL: worker migrate",
        ("worker", "migrate"),
        ("DATABASE_URL: is not a valid",),
        env={"DATABASE_URL": MALFORMED_DB},
    ),
    Case(
        "no DATABASE_URL: worker migrate",
        ("worker", "migrate"),
        ("DATABASE_URL is not set: `python -m worker migrate` outside `make run`",),
        env={"DATABASE_URL": None},
    ),
    Case(
        "no TEMPORAL_ADDRESS: worker",
        ("worker",),
        ("TEMPORAL_ADDRESS is not set: `python -m worker` outside `make run`",),
        env={"TEMPORAL_ADDRESS": None},
        subprocess=True,
    ),
    Case(
        "broken IPv6 URL: worker outbox",
        ("worker", "outbox"),
        ("DATABASE_URL: is not a valid",),
        env={"DATABASE_URL": MALFORMED_DB},
    ),
    Case(
        "broken IPv6 URL: worker",
        ("worker",),
        ("DATABASE_URL: is not a valid",),
        env={"DATABASE_URL": MALFORMED_DB},
        subprocess=True,
    ),
    Case(
        "unknown URL parameter",
        ("worker", "migrate"),
        ('invalid URI query parameter: "colour"',),
        env={"DATABASE_URL": f"postgresql://app:{DB_PASSWORD}@db/jobs?colour=blue"},
    ),
    Case(
        "unknown libpq option",
        ("worker", "outbox"),
        ('invalid connection option "bogus"',),
        env={"DATABASE_URL": f"host=db password={DB_PASSWORD} bogus=1"},
    ),
    Case(
        "URL port out of range",
        ("list",),
        ("DATABASE_URL: has a port that is not a number",),
        env={"DATABASE_URL": f"postgresql://app:{DB_PASSWORD}@db:99999/jobs"},
    ),
    Case(
        "address without port",
        ("list",),
        ("TEMPORAL_ADDRESS: must be host:port", "'no-port-here'"),
        env={"TEMPORAL_ADDRESS": "no-port-here"},
    ),
    Case(
        "address with two @",
        ("sync",),
        ("TEMPORAL_ADDRESS:", "'a@b@example.com:7233'"),
        catalog=job(),
        env={"TEMPORAL_ADDRESS": "a@b@example.com:7233"},
    ),
    Case(
        "address port 0",
        ("list",),
        ("TEMPORAL_ADDRESS: must be host:port with a port from 1 to 65535",),
        env={"TEMPORAL_ADDRESS": "localhost:0"},
    ),
    Case(
        "address port 99999",
        ("list",),
        ("TEMPORAL_ADDRESS:", "'localhost:99999'"),
        env={"TEMPORAL_ADDRESS": "localhost:99999"},
    ),
    Case(
        "unknown namespace: sync",
        ("sync", "--dry-run"),
        ("TEMPORAL_NAMESPACE: namespace 'no-such-namespace' does not exist",),
        catalog=job(),
        env={"TEMPORAL_NAMESPACE": "no-such-namespace"},
    ),
    Case(
        "unknown namespace: list",
        ("list",),
        ("TEMPORAL_NAMESPACE: namespace 'no-such-namespace' does not exist",),
        env={"TEMPORAL_NAMESPACE": "no-such-namespace"},
    ),
    Case(
        "unknown namespace: worker",
        ("worker",),
        ("TEMPORAL_NAMESPACE: namespace 'no-such-namespace' does not exist",),
        env={"TEMPORAL_NAMESPACE": "no-such-namespace"},
        subprocess=True,
    ),
    Case(
        "unknown namespace: health",
        ("worker", "health"),
        ("TEMPORAL_NAMESPACE: namespace 'no-such-namespace'",),
        env={"TEMPORAL_NAMESPACE": "no-such-namespace"},
    ),
    Case(
        "blank namespace",
        ("list",),
        ("TEMPORAL_NAMESPACE: must be a non-empty name",),
        env={"TEMPORAL_NAMESPACE": " "},
    ),
    Case(
        "missing TLS certificate",
        ("list",),
        ("TEMPORAL_TLS_CLIENT_CERT_PATH: cannot read '/nonexistent/client.pem'",),
        env={
            "TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent/client.pem",
            "TEMPORAL_TLS_CLIENT_KEY_PATH": "/nonexistent/client.key",
        },
    ),
    Case(
        "task queue too long",
        ("list",),
        ("TEMPORAL_TASK_QUEUE: must be a non-empty name of at most 1000 bytes",),
        env={"TEMPORAL_TASK_QUEUE": "q" * 1001},
    ),
    Case(
        "pool size 0",
        ("worker", "migrate"),
        ("DATABASE_POOL_SIZE:", "'0'"),
        env={"DATABASE_POOL_SIZE": "0"},
    ),
    Case(
        "connect timeout 1 s",
        ("worker", "migrate"),
        ("DATABASE_CONNECT_TIMEOUT_SECONDS:", "'1'"),
        env={"DATABASE_CONNECT_TIMEOUT_SECONDS": "1"},
    ),
    Case(
        "shutdown seconds a word",
        ("worker", "migrate"),
        ("WORKER_GRACEFUL_SHUTDOWN_SECONDS:", "'soon'"),
        env={"WORKER_GRACEFUL_SHUTDOWN_SECONDS": "soon"},
    ),
    Case(
        "shutdown seconds infinite",
        ("worker", "migrate"),
        ("WORKER_GRACEFUL_SHUTDOWN_SECONDS: must be a finite number",),
        env={"WORKER_GRACEFUL_SHUTDOWN_SECONDS": "inf"},
    ),
    Case(
        "idle timeout nan",
        ("worker", "migrate"),
        ("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS:",),
        env={"DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "nan"},
    ),
    Case(
        "metrics port 70000",
        ("worker", "migrate"),
        ("METRICS_PORT:", "'70000'"),
        env={"METRICS_PORT": "70000"},
    ),
    Case(
        "log format xml", ("worker", "migrate"), ("LOG_FORMAT:", "'xml'"), env={"LOG_FORMAT": "xml"}
    ),
    Case(
        "SMTP port a word", ("worker", "migrate"), ("SMTP_PORT:", "'abc'"), env={"SMTP_PORT": "abc"}
    ),
    Case(
        "webhook not http",
        ("worker", "migrate"),
        ("WEBHOOK_URL: must be an http:// or https:// URL",),
        env={"WEBHOOK_URL": f"ftp://x/?token={WEBHOOK_TOKEN}"},
    ),
    Case(
        "webhook not UTF-8",
        ("worker", "migrate"),
        ("WEBHOOK_URL: is not valid UTF-8 text",),
        # The byte 0xff, as Python hands an environment value that is not UTF-8 over.
        env={"WEBHOOK_URL": f"https://hooks.example.test/\udcff?token={WEBHOOK_TOKEN}"},
    ),
    Case(
        "webhook without a host",
        ("worker", "migrate"),
        ("WEBHOOK_URL: must be an http:// or https:// URL with a host",),
        env={"WEBHOOK_URL": f"https://?token={WEBHOOK_TOKEN}"},
    ),
    Case(
        "payments url garbage",
        ("worker", "migrate"),
        ("PAYMENTS_URL: must be an http:// or https:// URL with a host", "'pay here'"),
        env={"PAYMENTS_URL": "pay here"},
    ),
    Case(
        "payments url port 99999",
        ("worker", "migrate"),
        ("PAYMENTS_URL:", "'http://127.0.0.1:99999'"),
        env={"PAYMENTS_URL": "http://127.0.0.1:99999"},
    ),
    Case(
        "payments url garbage: list",
        ("list",),
        ("PAYMENTS_URL: must be an http:// or https:// URL with a host",),
        env={"PAYMENTS_URL": "::::"},
    ),
    Case(
        "outbox batch 0",
        ("worker", "migrate"),
        ("OUTBOX_BATCH_SIZE:", "'0'"),
        env={"OUTBOX_BATCH_SIZE": "0"},
    ),
    Case(
        "outbox lease infinite",
        ("worker", "migrate"),
        ("OUTBOX_LEASE_SECONDS: must be a finite number",),
        env={"OUTBOX_LEASE_SECONDS": "inf"},
    ),
    Case(
        "BACKFILL_MAX_RUNS 0",
        ("list",),
        ("BACKFILL_MAX_RUNS:", "'0'"),
        env={"BACKFILL_MAX_RUNS": "0"},
    ),
    Case(
        "sync lock 5 s",
        ("sync", "--dry-run"),
        ("SYNC_LOCK_SECONDS:", "'5'"),
        catalog=job(),
        env={"SYNC_LOCK_SECONDS": "5"},
    ),
    Case(
        "migrate on start perhaps",
        ("worker", "migrate"),
        ("MIGRATE_ON_START:", "'perhaps'"),
        env={"MIGRATE_ON_START": "perhaps"},
    ),
]

ARGUMENT_CASES = [
    Case(
        "trigger timeout -1",
        ("trigger", "bad-input-a", "--timeout", "-1"),
        ("argument --timeout:", "'-1'"),
    ),
    Case(
        "trigger timeout nan",
        ("trigger", "bad-input-a", "--timeout", "nan"),
        ("argument --timeout:", "'nan'"),
    ),
    Case(
        "trigger timeout inf",
        ("trigger", "bad-input-a", "--timeout", "inf"),
        ("argument --timeout:", "'inf'"),
    ),
    Case("wait -5", ("--wait-for-cluster", "-5", "sync"), ("argument --wait-for-cluster:", "'-5'")),
    Case(
        "wait nan", ("--wait-for-cluster", "nan", "sync"), ("argument --wait-for-cluster:", "'nan'")
    ),
    # The spelling of --wait-for-cluster before v4, removed in v8: refused, nothing synced.
    Case("wait before the command", ("--wait", "5", "sync"), ("invalid choice: '5'",)),
    Case(
        "next -n 0", ("next", "bad-input-a", "-n", "0"), ("argument -n: must be at least 1, got 0",)
    ),
    Case(
        "next -n 5000",
        ("next", "bad-input-a", "-n", "5000"),
        ("-n: must be between 1 and 1000, got 5000",),
    ),
    Case(
        "next -n a word",
        ("next", "bad-input-a", "-n", "many"),
        ("argument -n: must be a whole number, got 'many'",),
    ),
    Case(
        "next from a word",
        ("next", "bad-input-a", "--from", "yesterday"),
        ("--from: 'yesterday' is not a time",),
    ),
    Case(
        "next from year 1",
        ("next", "bad-input-a", "--from", "0001-01-01"),
        ("--from: '0001-01-01' is outside the years 1970 to 2100",),
    ),
    Case(
        "next from year 9999",
        ("next", "bad-input-a", "--from", "9999-12-31"),
        ("--from: '9999-12-31' is outside the years",),
    ),
    Case(
        "backfill in year 1",
        ("backfill", "bad-input-a", "--start", "0001-01-01", "--end", "0001-01-02"),
        ("--start: '0001-01-01' is outside the years",),
    ),
    Case(
        "backfill in year 9999",
        ("backfill", "bad-input-a", "--start", "9999-01-01", "--end", "9999-01-02"),
        ("--start: '9999-01-01' is outside the years",),
    ),
    Case(
        "backfill of the future",
        ("backfill", "bad-input-a", "--start", AHEAD, "--end", "2100-01-01"),
        ("--start", "is after now", "backfill runs past fire times only"),
    ),
    Case(
        "backfill into the future",
        ("backfill", "bad-input-a", "--start", "2026-01-01", "--end", AHEAD),
        ("--end", "is after now"),
    ),
    Case(
        "backfill end before start",
        ("backfill", "bad-input-a", "--start", "2026-02-01", "--end", "2026-01-01"),
        ("--start 2026-02-01T00:00:00Z is not before --end",),
    ),
    Case(
        "backfill max 0",
        ("backfill", "bad-input-a", "--start", "2026-01-01", "--end", "2026-01-02", "--max", "0"),
        ("argument --max: must be at least 1, got 0",),
    ),
    Case(
        "backfill max negative",
        ("backfill", "bad-input-a", "--start", "2026-01-01", "--end", "2026-01-02", "--max", "-3"),
        ("argument --max:", "-3"),
    ),
    Case(
        "backfill start a word",
        ("backfill", "bad-input-a", "--start", "soon", "--end", "2026-01-02"),
        ("--start: 'soon' is not a time",),
    ),
    Case(
        "backfill unknown job",
        ("backfill", "no-such-job", "--start", "2026-01-01", "--end", "2026-01-02"),
        ("unknown job 'no-such-job'",),
    ),
    Case(
        "describe unknown job",
        ("describe", "no-such-job"),
        ("unknown job 'no-such-job'; the catalog has: bad-input-a, bad-input-b",),
    ),
    Case("trigger unknown job", ("trigger", "no-such-job"), ("unknown job 'no-such-job'",)),
    Case(
        "pause with a blank note",
        ("pause", "bad-input-a", "--note", "   "),
        ("--note: say why the job is paused",),
    ),
    Case(
        "pause without a note",
        ("pause", "bad-input-a"),
        ("the following arguments are required: --note",),
    ),
    Case("resume unknown job", ("resume", "no-such-job"), ("unknown job 'no-such-job'",)),
    Case(
        "sync max-prune 150",
        ("sync", "--max-prune", "150"),
        ("argument --max-prune: must be a percentage from 0 to 100",),
    ),
    Case(
        "sync max-prune a word",
        ("sync", "--max-prune", "most"),
        ("argument --max-prune:", "'most'"),
    ),
    Case("sync lock-wait -1", ("sync", "--lock-wait", "-1"), ("argument --lock-wait:", "'-1'")),
    Case("check timeout 0", ("check", "--timeout", "0"), ("argument --timeout:", "'0'")),
    Case(
        "validate an empty catalog",
        ("validate",),
        ("has no jobs: a catalog schedules at least one",),
        catalog="# every job was removed\n",
    ),
    Case(
        "explain timeout nan",
        ("explain", "bad-input-a", "--timeout", "nan"),
        ("argument --timeout: must be a number of seconds above 0, at most 86400", "'nan'"),
    ),
    Case(
        "explain timeout inf",
        ("explain", "bad-input-a", "--timeout", "inf"),
        ("argument --timeout: must be a number of seconds above 0, at most 86400", "'inf'"),
    ),
    Case(
        "explain timeout 0",
        ("explain", "bad-input-a", "--timeout", "0"),
        ("argument --timeout: must be a number of seconds above 0, at most 86400", "'0'"),
    ),
    Case(
        "explain timeout -1",
        ("explain", "bad-input-a", "--timeout", "-1"),
        ("argument --timeout: must be a number of seconds above 0, at most 86400", "'-1'"),
    ),
    Case(
        "check lookback 0s",
        ("check", "--lookback", "0s"),
        ("argument --lookback: must be a positive duration",),
    ),
    Case("check lookback a number", ("check", "--lookback", "24"), ("argument --lookback:", "24")),
    Case("unknown command", ("frobnicate",), ("invalid choice: 'frobnicate'",)),
    Case("no command", (), ("the following arguments are required: COMMAND",)),
    Case(
        "worker outbox limit -1",
        ("worker", "outbox", "--limit", "-1"),
        ("argument --limit: must be between 1 and 10000, got -1",),
    ),
    Case(
        "worker outbox limit 0",
        ("worker", "outbox", "--limit", "0"),
        ("argument --limit:", "got 0"),
    ),
    Case(
        "worker unknown command",
        ("worker", "dance"),
        ("argument command: invalid choice: 'dance'",),
    ),
]

CASES = CATALOG_CASES + SETTINGS_CASES + ARGUMENT_CASES


def test_the_table_is_large_and_its_names_unique():
    assert len(CASES) >= 100
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.fixture(scope="module")
def table(temporal, postgres, tmp_path_factory) -> tuple[Settings, Path]:
    """The settings every case starts from (its own database and task queue) and the
    catalog of the baseline jobs."""
    database = postgres.create_database("bad_input", template=TEMPLATE_DB)
    settings = Settings(
        temporal_address=temporal.address,
        temporal_task_queue=f"test-{uuid.uuid4().hex[:12]}",
        database_url=database,
    )
    path = tmp_path_factory.mktemp("bad-input") / "baseline.toml"
    path.write_text(
        "".join(
            f'[{job_id}]\nkind = "invoice-reminders"\ncron = "{cron}"\ntimezone = "UTC"\n'
            "paused = true\n"
            for job_id, cron in BASELINE.items()
        )
    )
    return settings, path


@pytest.fixture(scope="module")
async def baseline(client, table):
    """The baseline schedules on the server (and no other managed one) while the table runs."""
    settings, _ = table
    jobs = parse_catalog({job_id: GOOD | {"cron": cron} for job_id, cron in BASELINE.items()})
    await sync(client, jobs, settings.temporal_task_queue, max_prune=1.0)
    yield
    for job_id in BASELINE:
        await client.get_schedule_handle(job_id).delete()


def case_env(settings: Settings) -> dict[str, str]:
    url = settings.database_url.get_secret_value().replace(
        "postgresql://postgres@", f"postgresql://postgres:{DB_PASSWORD}@"
    )
    return settings_env(
        settings,
        DATABASE_URL=url,  # trust auth: the password is carried, not needed
        SMTP_PASSWORD=SMTP_PASSWORD,
        WEBHOOK_URL=f"https://hooks.example.test/in?token={WEBHOOK_TOKEN}",
    )


def run_in_process(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """The command's `main` in a thread of this process, with `env` as the environment."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            entry = worker_main if argv[:1] == ["worker"] else schedules_main
            args = argv[1:] if argv[:1] == ["worker"] else argv
            try:
                code = entry(args)
            except SystemExit as exit_:  # argparse
                code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
        root.handlers[:] = handlers
        root.setLevel(level)
    return code, out.getvalue(), err.getvalue()


def run_subprocess(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    done = python_m(argv, env)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_bad_input_is_refused_in_one_line_and_changes_nothing(
    case, client, table, baseline, tmp_path
):
    settings, baseline_catalog = table
    before = await snapshot(client, set(BASELINE) | {"bad-job"})
    assert set(before) == set(BASELINE)
    argv = list(case.argv)
    if argv[:1] != ["worker"] and "--catalog" not in argv:
        path = baseline_catalog
        if case.catalog is not None:
            path = tmp_path / "jobs.toml"
            if isinstance(case.catalog, bytes):
                path.write_bytes(case.catalog)
            else:
                path.write_text(case.catalog)
        argv = ["--catalog", str(path), "--without-engine", *argv]
    env = {k: v for k, v in (case_env(settings) | case.env).items() if v is not None}
    runner = run_subprocess if case.subprocess else run_in_process
    full = (["schedules"] if argv[:1] != ["worker"] and case.subprocess else []) + argv
    code, out, err = await asyncio.to_thread(runner, full, env)
    redact.forget_secrets()  # this process is not the command: start each case afresh

    lines = err.strip().splitlines()
    assert "Traceback" not in err + out, err
    assert code == case.exit, (code, err)
    assert len(lines) == case.lines, err
    assert lines[0].startswith("error: "), err
    text = "\n".join(lines)
    for expected in case.says:
        assert expected in text, (expected, text)
    for secret in SECRETS:
        assert secret not in out + err
    assert await snapshot(client, set(BASELINE) | {"bad-job"}) == before
