"""A local SMTP server that keeps every email it receives: the local stack's inbox.

`make run` starts one on 127.0.0.1:8025 (the default `SMTP_HOST` / `SMTP_PORT`) writing each
message to `.dev/mail/` as an `.eml` file; the tests start their own. It is aiosmtpd, a real
SMTP server, so the relay's SMTP client is exercised end to end.

    python -m devstack.mailsink            # the newest messages in .dev/mail
    python -m devstack.mailsink -n 50 --dir .dev/mail
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import re
import threading
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

from aiosmtpd.controller import Controller

from devstack import sinks
from devstack.ports import require_free_port

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MESSAGE_ID = re.compile(rb"^Message-ID:[ \t]*(\S+)", re.IGNORECASE | re.MULTILINE)


class MailSink:
    """An aiosmtpd server on `host:port` (its own thread) that accepts every message.

    Messages are written to `directory` (one `<received>_<message id>.eml` each) when given,
    and kept in `messages` unless `keep` is false; with neither, only their `Message-ID`s are
    kept, in `ids`, without parsing (fast enough for benchmarks). `delay` holds each reply
    that long after the message arrived (a slow server, for tests).
    """

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        directory: Path | None = None,
        keep: bool = True,
        delay: float = 0.0,
    ) -> None:
        self.host = host
        self.port = port
        self.directory = directory
        self.keep = keep
        self.delay = delay
        self.messages: list[EmailMessage] = []
        self.ids: list[str] = []
        self.received = 0
        self._lock = threading.Lock()
        self._controller: Controller | None = None

    def start(self) -> MailSink:
        require_free_port(self.port, "the SMTP mail sink", self.host)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._controller = Controller(_Handler(self), hostname=self.host, port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    @property
    def running(self) -> bool:
        return self._controller is not None

    def message_ids(self) -> list[str]:
        with self._lock:
            return [str(m["Message-ID"]) for m in self.messages]

    def _receive(self, content: bytes) -> None:
        if not self.keep and self.directory is None:
            found = _MESSAGE_ID.search(content)
            with self._lock:
                self.received += 1
                self.ids.append(found[1].decode() if found else "")
            return
        message = email.message_from_bytes(content, policy=email.policy.default)
        if self.directory is not None:
            received = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            name = _UNSAFE.sub("_", str(message.get("Message-ID", "")).strip("<>"))[:80]
            (self.directory / f"{received}_{name or 'no-id'}.eml").write_bytes(content)
        with self._lock:
            self.received += 1
            if self.keep:
                self.messages.append(message)


class _Handler:
    def __init__(self, sink: MailSink) -> None:
        self.sink = sink

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd's hook name
        self.sink._receive(envelope.original_content or envelope.content)
        if self.sink.delay:
            await asyncio.sleep(self.sink.delay)
        return "250 Message accepted for delivery"


def newest(directory: Path, limit: int) -> list[str]:
    """One line per message (received, to, subject, Message-ID), the newest `limit`."""
    return sinks.newest(directory, ".eml", limit, _message_line)


def _message_line(path: Path) -> str:
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    received = path.name.split("_", 1)[0]
    return f"{received}  {message['To']}  {message['Subject']}  {message['Message-ID']}"


if __name__ == "__main__":
    sinks.show_newest(
        "python -m devstack.mailsink",
        __doc__,
        Path(".dev/mail"),
        ".eml",
        _message_line,
        dir_help="the sink's folder",
        count_help="how many messages",
        total="{count} message(s) in {directory}",
    )
