"""How outbox messages leave: SMTP for email types, an HTTP webhook for the rest.

A transport turns one `OutboxMessage` into one delivery and says how it failed: a
`DeliveryError` is transient (retried with backoff) unless `permanent` (a malformed payload,
a recipient the server refuses, a request the receiver rejects), which makes the message
dead at once. The message id is the receiver's idempotency key on every attempt: the
`Message-ID` header of an email, the `Idempotency-Key` header of a webhook call, so a
message delivered twice (a relay killed after sending, before recording it) can be
recognised and dropped downstream.

Error texts go to `outbox_messages.last_error`; they never carry a password or the webhook
URL (which may hold a token): `DeliveryError` scrubs every text it is given (`core.redact`),
a receiver's reply included.
"""

from __future__ import annotations

import asyncio
import email.errors
import email.utils
import functools
import quopri
from dataclasses import dataclass
from datetime import datetime
from email.header import Header
from email.headerregistry import Address
from typing import Any, Protocol
from uuid import UUID

import aiosmtplib
import httpx
from pydantic import SecretStr

from core import redact

# Longest error text kept per message.
MAX_ERROR = 1000


class DeliveryError(Exception):
    """One message could not be delivered; `permanent` means retrying cannot help."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(redact.scrub(message)[:MAX_ERROR])
        self.permanent = permanent


@dataclass(frozen=True)
class OutboxMessage:
    """A claimed row of `outbox_messages`."""

    id: UUID
    type: str
    payload: dict[str, Any]
    attempts: int
    occurred_at: datetime


class Transport(Protocol):
    """Delivers messages of some types; opened once per relay run, shared by its batches."""

    name: str

    def begin_batch(self) -> None:
        """Forget a failure seen in the previous batch: try the server again."""

    async def send(self, message: OutboxMessage) -> None:
        """Deliver `message` or raise `DeliveryError`."""

    async def close(self) -> None: ...


# --- email ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    sender: str
    username: str | None = None
    password: SecretStr | None = None
    starttls: bool = False
    tls: bool = False  # implicit TLS (SMTPS, usually port 465)
    timeout_seconds: float = 30.0
    # Right-hand side of `Message-ID: <message id@domain>`; by default the sender's domain.
    message_id_domain: str | None = None

    @functools.cached_property
    def sender_header(self) -> str:
        """`SMTP_FROM` as a From header value (a non-ASCII name RFC 2047-encoded)."""
        name, address = email.utils.parseaddr(self.sender)
        return email.utils.formataddr((name, address), charset="utf-8")

    @functools.cached_property
    def domain(self) -> str:
        if self.message_id_domain:
            return self.message_id_domain
        _, address = email.utils.parseaddr(self.sender)
        return address.rpartition("@")[2] or "localhost"


def _field(message: OutboxMessage, name: str) -> str:
    value = message.payload.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DeliveryError(
            f"malformed payload: {message.type} email needs a non-empty string field "
            f"{name!r}, got {'nothing' if value is None else type(value).__name__}",
            permanent=True,
        )
    return value.strip()


def recipient(message: OutboxMessage) -> Address:
    """The payload's `to` as one address, or a permanent `DeliveryError` saying what is wrong."""
    to = _field(message, "to")
    try:
        address = Address(addr_spec=to)
    # The email package's parse errors: defects are ValueErrors, `HeaderParseError` (two @)
    # is not; any of them makes the message dead, not retried.
    except (ValueError, IndexError, TypeError, email.errors.MessageError) as exc:
        raise DeliveryError(
            f"malformed payload: {message.type} field 'to' is not one email address "
            f"({type(exc).__name__})",
            permanent=True,
        ) from None
    if not address.username or "." not in address.domain:
        raise DeliveryError(
            f"malformed payload: {message.type} field 'to' is not one email address",
            permanent=True,
        )
    return address


def _content(message: OutboxMessage) -> tuple[str, str]:
    """Subject and text of an email message, by type."""
    if message.type == "InvoiceReminder":
        number = _field(message, "invoice_number")
        due = message.payload.get("due_date") or "its due date"
        return (
            f"Payment reminder: invoice {number}",
            f"Hello,\n\nour records show that invoice {number}, due on {due}, is still "
            "unpaid.\nIf you have paid it in the meantime, please ignore this message.\n\n"
            "Thank you,\nBilling\n",
        )
    # Any other email type carries its own subject and text.
    return _field(message, "subject"), _field(message, "text")


def _header(message: OutboxMessage, value: str) -> str:
    """One header value: refused with a line break (header injection), RFC 2047 if not ASCII."""
    if "\r" in value or "\n" in value:
        raise DeliveryError(
            f"malformed payload: {message.type} has a line break in an email header value",
            permanent=True,
        )
    return value if value.isascii() else Header(value, "utf-8").encode()


def _body(text: str) -> tuple[str, bytes]:
    """(headers, body): plain 7-bit when it can be, else UTF-8 quoted-printable."""
    lines = text.splitlines()
    if text.isascii() and all(len(line) <= 998 for line in lines):
        return (
            'Content-Type: text/plain; charset="us-ascii"\r\nContent-Transfer-Encoding: 7bit',
            "\r\n".join(lines).encode("ascii") + b"\r\n",
        )
    encoded = quopri.encodestring(text.encode("utf-8")).replace(b"\r\n", b"\n")
    return (
        'Content-Type: text/plain; charset="utf-8"\r\nContent-Transfer-Encoding: quoted-printable',
        encoded.rstrip(b"\n").replace(b"\n", b"\r\n") + b"\r\n",
    )


def render_email(message: OutboxMessage, config: SmtpConfig, to: Address | None = None) -> bytes:
    """The email for `message` (to `to`, by default its payload's), as the bytes sent after
    DATA; a permanent `DeliveryError` if the payload cannot make one.

    Written out directly, every header checked here: the `email` package's header parsing
    and folding cost about 1 ms per message, more than the rest of a delivery.
    """
    to = to or recipient(message)
    subject, text = _content(message)
    content_headers, body = _body(text)
    headers = [
        f"From: {config.sender_header}",
        f"To: {to.addr_spec}",
        f"Subject: {_header(message, subject)}",
        # Same id and date on every attempt: the receiver's deduplication key.
        f"Message-ID: <{message.id}@{config.domain}>",
        f"Date: {email.utils.format_datetime(message.occurred_at)}",
        f"X-Outbox-Type: {_header(message, message.type)}",
        "MIME-Version: 1.0",
        content_headers,
    ]
    return ("\r\n".join(headers) + "\r\n\r\n").encode("ascii") + body


def _smtp_failure(exc: BaseException, where: str) -> DeliveryError:
    """Translate an SMTP client error: 5xx replies are permanent, the rest transient."""
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
        codes = [r.code for r in exc.recipients]
        return DeliveryError(
            f"SMTP {where} refused the recipient: "
            + "; ".join(f"{r.code} {r.message}" for r in exc.recipients),
            permanent=bool(codes) and all(500 <= c < 600 for c in codes),
        )
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        # Wrong credentials fail every message alike: retry, an operator must fix them.
        return DeliveryError(
            f"SMTP {where} login failed ({exc.code}): check SMTP_USERNAME / SMTP_PASSWORD"
        )
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return DeliveryError(
            f"SMTP {where} answered {exc.code} {exc.message}",
            permanent=500 <= exc.code < 600,
        )
    return DeliveryError(f"SMTP {where} unavailable: {type(exc).__name__}: {exc}")


class SmtpTransport:
    """Email over SMTP, with up to `connections` connections kept open across batches.

    After a connection fails, the rest of the batch fails at once with the same error
    instead of waiting for one timeout per message.
    """

    name = "email"

    def __init__(self, config: SmtpConfig, connections: int) -> None:
        self.config = config
        self._where = f"{config.host}:{config.port}"
        self._envelope_from = email.utils.parseaddr(config.sender)[1]
        self._slots = asyncio.Semaphore(connections)
        self._idle: list[aiosmtplib.SMTP] = []
        self._down: DeliveryError | None = None

    def begin_batch(self) -> None:
        self._down = None

    async def _connect(self) -> aiosmtplib.SMTP:
        config = self.config
        client = aiosmtplib.SMTP(
            hostname=config.host,
            port=config.port,
            timeout=config.timeout_seconds,
            use_tls=config.tls,
            start_tls=config.starttls and not config.tls,
        )
        await client.connect()
        if config.username:
            password = config.password.get_secret_value() if config.password else ""
            await client.login(config.username, password)
        return client

    async def send(self, message: OutboxMessage) -> None:
        address = recipient(message)  # a malformed payload never connects
        mail = render_email(message, self.config, address)
        to = [address.addr_spec]
        async with self._slots:
            if self._down is not None:
                raise DeliveryError(f"not attempted, server down in this batch: {self._down}")
            reused = bool(self._idle)
            client = self._idle.pop() if reused else None
            try:
                client = client or await self._connect()
                try:
                    await client.sendmail(self._envelope_from, to, mail)
                except (aiosmtplib.SMTPServerDisconnected, ConnectionError):
                    if not reused:
                        raise
                    # An idle connection the server closed meanwhile: once more on a new one.
                    _discard(client)
                    client = await self._connect()
                    await client.sendmail(self._envelope_from, to, mail)
            except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
                if client is not None:
                    _discard(client)
                failure = _smtp_failure(exc, self._where)
                if isinstance(exc, OSError | TimeoutError) and not isinstance(
                    exc, aiosmtplib.SMTPResponseException
                ):
                    self._down = failure  # the server, not this message
                raise failure from None
            except BaseException:  # cancelled mid-send: the connection state is unknown
                if client is not None:
                    _discard(client)
                raise
            self._idle.append(client)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for client in idle:
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError, TimeoutError):
                _discard(client)


def _discard(client: aiosmtplib.SMTP) -> None:
    if client.is_connected:
        client.close()


# --- webhook ----------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookConfig:
    url: SecretStr
    timeout_seconds: float = 10.0


# Client errors a receiver may stop answering with on its own: retried.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})


def webhook_body(message: OutboxMessage) -> dict[str, Any]:
    return {
        "id": str(message.id),
        "type": message.type,
        "occurred_at": message.occurred_at.isoformat(),
        "payload": message.payload,
    }


class WebhookTransport:
    """Each message as one JSON POST to `WEBHOOK_URL` with `Idempotency-Key: <message id>`.

    2xx is delivered; 408, 409, 425, 429, 5xx and network errors are retried; any other
    status is permanent.
    """

    name = "webhook"

    def __init__(self, config: WebhookConfig, connections: int) -> None:
        self.config = config
        self._url = config.url.get_secret_value()
        # Its path, query and token too: a receiver may echo its request line back.
        redact.add_url_secrets(self._url)
        self._client = httpx.AsyncClient(
            timeout=config.timeout_seconds,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            headers={"User-Agent": "scheduled-jobs-outbox-relay"},
            follow_redirects=False,
        )

    def begin_batch(self) -> None:
        pass

    def _scrub(self, text: str) -> str:
        return redact.scrub(text.replace(self._url, "WEBHOOK_URL"))

    async def send(self, message: OutboxMessage) -> None:
        headers = {"Idempotency-Key": str(message.id), "X-Outbox-Type": message.type}
        try:
            response = await self._client.post(
                self._url, json=webhook_body(message), headers=headers
            )
        except httpx.HTTPError as exc:
            raise DeliveryError(
                f"webhook unavailable: {type(exc).__name__}: {self._scrub(str(exc))}"
            ) from None
        status = response.status_code
        if 200 <= status < 300:
            return
        detail = self._scrub(response.text[:200].strip())
        raise DeliveryError(
            f"webhook answered HTTP {status} {response.reason_phrase}"
            + (f": {detail}" if detail else ""),
            permanent=400 <= status < 500 and status not in RETRYABLE_4XX,
        )

    async def close(self) -> None:
        await self._client.aclose()
