"""Per-key request rate limits and the request body's size and type.

The rate limit is a token bucket per key in this process: with N replicas behind a load
balancer a key may send up to N times the rate. It protects a replica from one noisy
key; a fleet-wide quota would need shared state (the database), which every request
would then pay for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import problem_response


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """A token bucket per key: `burst` requests at once, refilled at `rate` a second."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[int, _Bucket] = field(default_factory=dict)

    def wait_seconds(self, key_id: int) -> int:
        """Take a token for `key_id`: 0 if there was one, else the whole seconds to wait
        before there is (the `Retry-After`)."""
        now = self.clock()
        bucket = self._buckets.setdefault(key_id, _Bucket(float(self.burst), now))
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0
        return max(1, math.ceil((1 - bucket.tokens) / self.rate))


# The methods whose body the API reads; each takes JSON only.
_WITH_BODY = {"POST", "PUT", "PATCH"}
_JSON_TYPES = ("application/json", "application/merge-patch+json")
# The dashboard's forms (api/pages) post HTML forms, under /ui/ only.
_FORM_TYPES = (*_JSON_TYPES, "application/x-www-form-urlencoded")


class BodyLimits:
    """ASGI middleware: a body over `max_bytes` is 413 (by its Content-Length, or as it
    streams in), a body of another type than JSON is 415, before any route reads it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        types = _FORM_TYPES if scope["path"].startswith("/ui/") else _JSON_TYPES
        if (length not in ("", "0") or "transfer-encoding" in headers) and media not in types:
            shown = media or "none"
            response = problem_response(
                415,
                "unsupported-media-type",
                f"content-type: must be application/json, got {shown}",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, self._counted(receive), send)

    def _counted(self, receive: Receive) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:  # FastAPI passes an HTTPException on as it is
                    raise HTTPException(413, f"body: must be at most {self.max_bytes} bytes")
            return message

        return counted

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem_response(
            413, "too-large", f"body: must be at most {self.max_bytes} bytes"
        )
        await response(scope, receive, send)
