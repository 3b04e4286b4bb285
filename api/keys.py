"""API keys: created, listed and revoked by the operator (`python -m api keys ...`), and
checked on every request (`api.auth`).

A key reads `sjk_<id>_<secret>`: the id finds its row, the secret is 32 random bytes from
`secrets` (URL-safe base64). The row keeps only the secret's SHA-256. A key of 256 random
bits needs no slow password hash (bcrypt, argon2 exist to slow the guessing of
low-entropy passwords): a single SHA-256 cannot be reversed and 2^256 secrets cannot be
tried, so the check stays one hash and one constant-time comparison
(`hmac.compare_digest`) per request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from core.errors import InvalidScheduleError, SchedulerError
from core.sql import queries
from schedules.tenants import store
from schedules.tenants.model import checked_by
from schedules.tenants.store import Database

Q = queries("api.sql", "keys")
PREFIX = "sjk"
SECRET_BYTES = 32
Role = Literal["tenant", "operator"]


class KeyNotFoundError(SchedulerError):
    """No API key has this id."""


@dataclass(frozen=True)
class Caller:
    """Who sends a request: the key's id, its role, and its tenant (None: the operator,
    who sees every tenant)."""

    key_id: int
    role: Role
    tenant: str | None

    @property
    def author(self) -> str:
        """What the change log records as the author of this caller's writes."""
        return f"api-key:{self.key_id}"


@dataclass(frozen=True)
class KeyInfo:
    """A key as `keys list` shows it: never its secret."""

    id: int
    tenant: str | None
    role: Role
    created_at: datetime
    created_by: str
    note: str
    revoked_at: datetime | None


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def parse(key: str) -> tuple[int, str] | None:
    """The id and secret of `sjk_<id>_<secret>`, or None if `key` is not of that shape."""
    prefix, _, rest = key.partition("_")
    digits, _, secret = rest.partition("_")
    if prefix != PREFIX or not digits.isdigit() or len(digits) > 18 or not secret:
        return None
    return int(digits), secret


async def create(
    db: Database, *, tenant: str | None, by: str = "", note: str = ""
) -> tuple[KeyInfo, str]:
    """A new key for `tenant` (None: the operator role): its record, and the key itself,
    which is shown this once and stored nowhere."""
    if tenant is not None:
        _checked_tenant(tenant)
    checked_by(by)
    if len(note) > 1000:
        raise InvalidScheduleError(f"note: must be at most 1000 characters, got {len(note)}")
    secret = secrets.token_urlsafe(SECRET_BYTES)
    role: Role = "operator" if tenant is None else "tenant"
    params = {
        "tenant": tenant,
        "role": role,
        "secret_sha256": digest(secret),
        "by": by,
        "note": note,
    }
    async with store.transaction(db) as conn:
        row = await _one(conn, "insert", params)
    info = KeyInfo(**row)
    return info, f"{PREFIX}_{info.id}_{secret}"


def _checked_tenant(tenant: str) -> None:
    """A tenant as a schedule's `tenant` field takes it: non-empty, no surrounding spaces,
    printable, at most 200 characters."""
    if not tenant or tenant != tenant.strip():
        raise InvalidScheduleError(
            f"tenant: must be non-empty text without surrounding spaces, got {tenant!r}"
        )
    try:
        checked_by(tenant)
    except InvalidScheduleError as exc:
        raise InvalidScheduleError(str(exc).replace("by:", "tenant:", 1)) from None


async def _one(conn: Any, name: str, params: dict[str, Any]) -> dict[str, Any]:
    cur = await conn.execute(Q[name], params)
    row = await cur.fetchone()
    if row is None:
        raise KeyNotFoundError(f"no API key has id {params.get('id')}")
    return row


async def list_keys(db: Database) -> list[KeyInfo]:
    """Every key, revoked ones too, by id."""
    async with store.transaction(db) as conn:
        cur = await conn.execute(Q["list"])
        return [KeyInfo(**row) for row in await cur.fetchall()]


async def revoke(db: Database, key_id: int, *, now: datetime) -> KeyInfo:
    """Revoke a key: from now on it answers 401. Revoking it again changes nothing."""
    async with store.transaction(db) as conn:
        return KeyInfo(**await _one(conn, "revoke", {"id": key_id, "now": now}))


async def authenticate(db: Database, key: str) -> Caller | None:
    """The caller `key` identifies, or None for a key that is malformed, unknown, wrong
    or revoked (the caller answers each the same way, 401)."""
    parsed = parse(key)
    if parsed is None:
        return None
    key_id, secret = parsed
    async with store.transaction(db) as conn:
        cur = await conn.execute(Q["by_id"], {"id": key_id})
        row = await cur.fetchone()
    if row is None or row["revoked_at"] is not None:
        return None
    if not hmac.compare_digest(bytes(row["secret_sha256"]), digest(secret)):
        return None
    return Caller(key_id=row["id"], role=row["role"], tenant=row["tenant"])
