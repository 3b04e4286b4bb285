"""Errors as `application/problem+json` (RFC 9457): `type`, `title`, `status`, `detail`.

`detail` is the library's own one line, the words the CLI prints after `error:` (it
names the field and the value); `code` says which case it is, for a client to branch on
without parsing text. Every refusal is a 4xx: a 5xx means a bug (or the database away:
503).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from core import redact
from core.errors import (
    ConflictError,
    InvalidScheduleError,
    QuotaError,
    ScheduleNotFoundError,
    SchedulerError,
    StaleVersionError,
    first_line,
)
from schedules.catalog.problems import short
from schedules.record import DatabaseUnavailableError

MEDIA_TYPE = "application/problem+json"

# The library's errors by status, most specific first (`isinstance` order).
STATUS: Sequence[tuple[type[Exception], int, str]] = (
    (ScheduleNotFoundError, 404, "not-found"),
    (StaleVersionError, 412, "stale-version"),
    (ConflictError, 409, "conflict"),
    (QuotaError, 403, "quota"),
    (InvalidScheduleError, 422, "invalid"),
    (DatabaseUnavailableError, 503, "unavailable"),
    (SchedulerError, 400, "refused"),
)
TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    412: "Precondition failed",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    428: "Precondition required",
    429: "Too many requests",
    503: "Service unavailable",
}
CODES = {
    400: "bad-request",
    401: "unauthorized",
    404: "not-found",
    405: "method-not-allowed",
    413: "too-large",
    415: "unsupported-media-type",
    422: "invalid",
    428: "precondition-required",
    429: "rate-limited",
}


class Problem(Exception):
    """A refusal the API itself makes (not the library's): its status, code and line."""

    def __init__(
        self, status: int, detail: str, *, code: str | None = None, headers: Mapping[str, str] = {}
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code or CODES.get(status, "error")
        self.headers = dict(headers)


def problem_response(
    status: int, code: str, detail: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": redact.scrub(detail),
        "code": code,
    }
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def library_problem(exc: SchedulerError) -> JSONResponse:
    """The library's error as its problem: the status of its class, its first line."""
    for cls, status, code in STATUS:
        if isinstance(exc, cls):
            return problem_response(status, code, first_line(exc))
    raise AssertionError("SchedulerError is the last entry")  # pragma: no cover


def validation_detail(errors: Sequence[Mapping[str, Any]]) -> str:
    """FastAPI's validation errors as one line in the library's words: `limit: must be
    ... (got 'x')`, the request's part (`body`, `query`, `header`) left out."""
    problems = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header"):
            where, loc = loc[0], loc[1:]
        else:
            where = "body"
        field = ".".join(loc) or where
        message = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
        if err.get("type") == "missing":
            problems.append(f"{field}: is required")
        elif err.get("type") == "json_invalid":
            problems.append(f"body: is not valid JSON ({err.get('ctx', {}).get('error', '')})")
        else:
            problems.append(f"{field}: {message} (got {short(err.get('input'))})")
    return "; ".join(problems) or "the request is invalid"


async def _on_library(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SchedulerError)
    return library_problem(exc)


async def _on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return problem_response(exc.status, exc.code, exc.detail, exc.headers)


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return problem_response(422, "invalid", validation_detail(exc.errors()))


async def _on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(status, "Error")
    return problem_response(status, CODES.get(status, "error"), detail, exc.headers)


async def _on_database(request: Request, exc: Exception) -> JSONResponse:
    """PostgreSQL away (or no pooled connection free in time): 503, worth a retry."""
    reason = first_line(exc, "no connection") if not isinstance(exc, PoolTimeout) else "busy"
    return problem_response(
        503, "unavailable", f"PostgreSQL is unavailable: {reason}", {"Retry-After": "1"}
    )


def install(app: FastAPI) -> None:
    """Answer every error the app raises as problem+json."""
    app.add_exception_handler(psycopg.OperationalError, _on_database)
    app.add_exception_handler(PoolTimeout, _on_database)
    app.add_exception_handler(SchedulerError, _on_library)
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
