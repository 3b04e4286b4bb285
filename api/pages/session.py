"""Who looks at the dashboard: an operator, by a signed session cookie or a trusted
proxy's identity header; and the CSRF token every form that writes carries.

Login takes an operator API key (`python -m api keys create --operator`) once, in a form;
the answer sets `sj_session`, a cookie holding the key's id, an expiry and a random nonce,
signed with HMAC-SHA256 (`API_SESSION_SECRET`). The key's secret is never in it. Every
request reads the key's row again: a revoked key, or a tenant's, opens no page.

In production a reverse proxy that authenticates its users (oauth2-proxy, an identity-aware
proxy) can name the user in a header instead: `API_PROXY_USER_HEADER` names the header and
`API_TRUSTED_PROXY` the proxy's address; a request from any other address is not believed.

Each session's CSRF token is the HMAC of its nonce: a form posts it back as `csrf`, and a
post without the session's token is refused before anything is read or written. The login
form has its own token, a random value in a cookie the form repeats (double submit).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from fastapi import Request, Response

from api.keys import Q as KEYS
from api.keys import authenticate
from schedules.tenants import store

COOKIE = "sj_session"
LOGIN_COOKIE = "sj_login"
LIFETIME = 12 * 3600  # seconds a session lasts


class NotSignedIn(Exception):
    """The request has no valid operator session: the pages answer with the login form."""


class CsrfRefused(Exception):
    """A form that writes came without its session's CSRF token: nothing is read or written."""


@dataclass(frozen=True)
class Operator:
    """Who is signed in: `author` is what the change log records for their writes."""

    author: str
    nonce: str

    def csrf(self, secret: bytes) -> str:
        return _sign(secret, f"csrf:{self.nonce}")


def _sign(secret: bytes, text: str) -> str:
    mac = hmac.new(secret, text.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def session_secret(request: Request) -> bytes:
    """The signing secret: `API_SESSION_SECRET`, else one random per process (sessions then
    end with the process and do not carry across replicas: set it in production)."""
    state = request.app.state
    if getattr(state, "session_secret", None) is None:
        given = state.settings.api_session_secret
        state.session_secret = (
            given.get_secret_value().encode() if given else secrets.token_bytes(32)
        )
    return state.session_secret


async def operator_key(conn, key: str) -> int | None:
    """The id of `key` if it is a live operator key (`api.keys.authenticate`), else None."""
    found = await authenticate(conn, key)
    return found.key_id if found is not None and found.tenant is None else None


def start(request: Request, response: Response, key_id: int) -> None:
    """Set the signed session cookie of operator key `key_id`."""
    payload = {"key": key_id, "exp": int(time.time()) + LIFETIME, "n": secrets.token_hex(16)}
    body = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    value = f"{body}.{_sign(session_secret(request), body)}"
    response.set_cookie(
        COOKIE,
        value,
        max_age=LIFETIME,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/ui",
    )


def end(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui")


def _payload(request: Request) -> dict | None:
    value = request.cookies.get(COOKIE, "")
    body, _, mac = value.partition(".")
    if not body or not hmac.compare_digest(mac, _sign(session_secret(request), body)):
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("exp", 0) < time.time():
        return None
    return payload


async def operator(request: Request, conn) -> Operator:
    """The signed-in operator, or `NotSignedIn`: by the proxy's header from the trusted
    proxy (when set up), else by a session whose key is still a live operator key."""
    settings = request.app.state.settings
    header = settings.api_proxy_user_header
    if header and request.client and request.client.host == settings.api_trusted_proxy:
        user = request.headers.get(header, "").strip()
        if user:
            return Operator(f"proxy:{user}", nonce=_sign(session_secret(request), user))
    payload = _payload(request)
    if payload is None:
        raise NotSignedIn
    async with store.transaction(conn) as tx:
        cur = await tx.execute(KEYS["by_id"], {"id": payload["key"]})
        row = await cur.fetchone()
    if row is None or row["revoked_at"] is not None or row["role"] != "operator":
        raise NotSignedIn
    return Operator(f"api-key:{row['id']}", nonce=str(payload["n"]))


def check_csrf(request: Request, who: Operator, form: dict[str, str]) -> None:
    """Refuse a write whose form lacks the session's CSRF token."""
    given = form.get("csrf", "")
    if not given or not hmac.compare_digest(given, who.csrf(session_secret(request))):
        raise CsrfRefused


def login_token(request: Request) -> str:
    """The login form's token: the cookie's, or a new one the answer sets."""
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(16)


def check_login_token(request: Request, form: dict[str, str]) -> None:
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    if not cookie or not hmac.compare_digest(cookie, form.get("csrf", "")):
        raise CsrfRefused
