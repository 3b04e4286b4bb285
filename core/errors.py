"""The project's exception hierarchy: every message names the job, field, value or id."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from core import redact

# `... Os { code: 111, kind: ConnectionRefused, message: "Connection refused" } ...`
_OS_MESSAGE = re.compile(r'(?:message|error): "([^"]+)"')


def setting_hint(variable: str, environ: Mapping[str, str] = os.environ) -> str:
    """What an error about a server it could not reach names: `(VARIABLE)`, or, when the
    environment does not set it, that the local stack's default was tried (a newcomer
    outside `make run`)."""
    if environ.get(variable, "").strip():
        return f"({variable})"
    return f"({variable} is not set, so the local stack's default was tried)"


def transport_cause(exc: BaseException) -> str:
    """The gist of a transport error: the OS's message inside the SDK's Rust error text."""
    text = str(exc)
    found = _OS_MESSAGE.findall(text)
    if found:
        return redact.scrub(found[-1])
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    return redact.scrub(first[:200])


class SchedulerError(Exception):
    """Base of every error this project raises on purpose."""

    # What a command-line entry point exits with when this error stops it.
    exit_code = 2


class SettingsError(SchedulerError):
    """An environment variable is missing or malformed."""


class MigrationError(SchedulerError):
    """A migration file is malformed or an applied one was changed."""


class JobFamilyError(SchedulerError):
    """A job family could not be loaded: its entry point fails to import, or it declares a
    name another family declares too. The fleet's code is wrong: exit 2."""


class CatalogError(SchedulerError):
    """The job catalog is invalid; nothing was sent to Temporal."""


class TemporalUnreachableError(SchedulerError):
    """Temporal did not answer within the allowed time."""

    exit_code = 1


class RuntimeScheduleError(SchedulerError):
    """A request about a runtime schedule (`schedules.tenants`) was refused; nothing was
    written. Bad input: exit 2."""


class InvalidScheduleError(RuntimeScheduleError, ValueError):
    """A runtime schedule's field is invalid; the message names the field and the value."""


class ScheduleNotFoundError(RuntimeScheduleError):
    """No (live) runtime schedule has this id, or this tenant and name."""


class QuotaError(RuntimeScheduleError):
    """A tenant's quota refuses the request; the message names the tenant, the limit and
    the value."""


class ConflictError(RuntimeScheduleError):
    """Someone else changed the schedule first (a stale version), or a create names an
    existing schedule with another definition. Re-read and try again: exit 1."""

    exit_code = 1


class StaleVersionError(ConflictError):
    """A write named a version of the schedule that is no longer the current one (the
    HTTP API answers it 412, a precondition that failed)."""


def first_line(exc: BaseException, empty: str | None = None) -> str:
    """The first line of `exc`'s message (not scrubbed of secrets: callers redact it);
    `empty` when it has none (default: the exception's type name)."""
    lines = str(exc).strip().splitlines()
    if lines:
        return lines[0]
    return type(exc).__name__ if empty is None else empty
