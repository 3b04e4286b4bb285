"""A local HTTP server for tests that play a receiver (webhooks, notices, OTLP): on
127.0.0.1 at a free port, one thread a request, served from a daemon thread."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing (the test's output stays the test's)."""

    def log_message(self, *args: Any) -> None:
        pass


class LocalServer:
    """Serves `handler` until `stop`; `port`: where it listens."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
