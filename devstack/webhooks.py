"""A local webhook receiver that keeps every delivery: the local stack's endpoint.

`make run` starts one on 127.0.0.1:8091 and points the workers' `WEBHOOK_URL` at it, so
outbox messages that are not email (ReconciliationAlert, LateFeeAdded ...) are delivered
instead of waiting; each delivery is written to `.dev/webhooks/` as a `.json` file (its
body and idempotency key; the URL's query, where a token would be, is not kept). The tests
start their own. A second delivery with the same idempotency key is answered 200 and kept
once, as a real endpoint that deduplicates would.

    python -m devstack.webhooks            # the newest deliveries in .dev/webhooks
    python -m devstack.webhooks -n 50 --dir .dev/webhooks
"""

from __future__ import annotations

import json
import re
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devstack import sinks
from devstack.sinks import serve_http, shut_down

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class WebhookSink:
    """An HTTP server on `host:port` (its own thread) that accepts every POST."""

    def __init__(self, port: int, host: str = "127.0.0.1", directory: Path | None = None) -> None:
        self.host, self.port, self.directory = host, port, directory
        self.received: list[dict] = []
        self._keys: set[str] = set()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hooks"

    def start(self) -> WebhookSink:
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._server = serve_http(
            self.host, self.port, "the webhook receiver", {"POST": self._receive}
        )
        return self

    def stop(self) -> None:
        shut_down(self._server)
        self._server = None

    def _receive(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length)
        key = request.headers.get("Idempotency-Key") or ""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode(errors="replace")
        delivery = {"idempotency_key": key, "path": request.path.split("?")[0], "body": body}
        with self._lock:
            first = not key or key not in self._keys
            self._keys.add(key)
            if first:
                self.received.append(delivery)
        if first and self.directory is not None:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
            name = f"{stamp}_{_UNSAFE.sub('-', key or 'no-key')[:120]}.json"
            (self.directory / name).write_text(json.dumps(delivery, indent=2, default=str))
        request.send_response(200)
        request.send_header("Content-Length", "0")
        request.end_headers()


def newest(directory: Path, limit: int) -> list[str]:
    """One line per delivery (received, type, idempotency key), the newest `limit`."""
    return sinks.newest(directory, ".json", limit, _delivery_line)


def _delivery_line(path: Path) -> str:
    delivery = json.loads(path.read_text())
    body = delivery.get("body")
    kind = body.get("type", "?") if isinstance(body, dict) else "?"
    return f"{path.name.split('_', 1)[0]}  {kind}  {delivery.get('idempotency_key')}"


if __name__ == "__main__":
    sinks.show_newest(
        "python -m devstack.webhooks",
        __doc__,
        Path(".dev/webhooks"),
        ".json",
        _delivery_line,
        dir_help="its folder",
        count_help="how many deliveries",
        total="{count} deliver(ies) in {directory}",
    )
