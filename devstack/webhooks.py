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

import argparse
import json
import re
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devstack.ports import require_free_port

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
        require_free_port(self.port, "the webhook receiver", self.host)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                sink._receive(self)

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
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
    files = sorted(directory.glob("*.json"))[-limit:] if directory.is_dir() else []
    lines = []
    for path in files:
        delivery = json.loads(path.read_text())
        body = delivery.get("body")
        kind = body.get("type", "?") if isinstance(body, dict) else "?"
        lines.append(f"{path.name.split('_', 1)[0]}  {kind}  {delivery.get('idempotency_key')}")
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m devstack.webhooks", description=__doc__)
    parser.add_argument("--dir", type=Path, default=Path(".dev/webhooks"), help="its folder")
    parser.add_argument("-n", type=int, default=20, help="how many deliveries")
    args = parser.parse_args()
    lines = newest(args.dir, args.n)
    total = len(list(args.dir.glob("*.json"))) if args.dir.is_dir() else 0
    print("\n".join([*lines, f"{total} deliver(ies) in {args.dir}"]))
