"""No secret leaves an activity in its error: what Temporal records in workflow history.

An activity's exception becomes the failure in the workflow's history (message, type and
the formatted stack trace) and, through the workflow, `job_executions.error`. The work
activities translate what they know (the outbox transports scrub their errors), but a
library error can still quote a connection string or a URL. This interceptor passes every
exception through unchanged unless its text holds a secret (`core.redact`); then it raises
an `ApplicationError` of the same type name and retry behaviour with the text scrubbed.
"""

from __future__ import annotations

import traceback
from typing import Any

from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from core import redact


def scrubbed(exc: BaseException) -> BaseException | None:
    """A replacement for `exc` without the secrets its text holds, or None if it holds none."""
    text = "".join(traceback.format_exception(exc))
    if redact.scrub(text) == text:
        return None
    if isinstance(exc, ApplicationError):
        return ApplicationError(
            redact.scrub(exc.message),
            type=exc.type,
            non_retryable=exc.non_retryable,
            next_retry_delay=exc.next_retry_delay,
            category=exc.category,
        )
    return ApplicationError(redact.scrub(str(exc)), type=type(exc).__name__)


class _ScrubbingActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except Exception as exc:
            replacement = scrubbed(exc)
            if replacement is None:
                raise
            raise replacement from None


class ScrubbingInterceptor(Interceptor):
    """Worker interceptor: activity errors reach Temporal with their secrets scrubbed."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ScrubbingActivityInbound(next)
