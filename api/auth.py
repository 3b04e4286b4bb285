"""Who sends a request: `caller`, the dependency every resource route takes.

The key travels as `Authorization: Bearer sjk_<id>_<secret>`. No key, a malformed one,
an unknown id, a wrong secret and a revoked key all answer the same 401 line, so an
answer tells nothing about which ids exist. Nothing here logs the header.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api import keys
from api.deps import Conn
from api.keys import Caller
from api.problems import Problem

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    description="An API key (`python -m api keys create`), as `Authorization: Bearer sjk_...`",
)
UNAUTHORIZED = "authorization: a valid API key is required (Authorization: Bearer sjk_...)"


async def caller(
    request: Request,
    conn: Conn,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The caller the request's key identifies, within its rate limit; else 401 (no,
    wrong or revoked key) or 429 with `Retry-After`."""
    found = None if credentials is None else await keys.authenticate(conn, credentials.credentials)
    if found is None:
        raise Problem(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
    wait = request.app.state.rate_limiter.wait_seconds(found.key_id)
    if wait:
        raise Problem(
            429,
            f"key {found.key_id}: over its rate limit; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    return found


Authorized = Annotated[Caller, Depends(caller)]
