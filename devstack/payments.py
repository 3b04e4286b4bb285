"""A local payment provider for `make run` and the tests: a real HTTP charges API.

It answers `POST /v1/charges` (and `GET /v1/charges?reference=`) as card processors do (see
`jobs/monthly_billing/provider.py`): a charge is keyed by its `Idempotency-Key`, and a second
request with the same key gets the first answer again (marked `Idempotent-Replayed: true`),
so a customer is charged once however often a charge is sent. A payment method named
`pm_decline_<code>` is declined with that decline code; any other is charged.

Tests steer it: `hold()` makes requests wait until `release()` (a fault lands while a
charge is in flight, where the test wants it), `hold_answers()` charges them but keeps the
answers back, `kill()` dies as a process does (the charges it made stay in its record, the
requests in flight get no answer, nothing listens until `start()` again), `fail_with(503)`
answers every request with an error until `recover()`, and `requests` lists every key
received, in order.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from devstack.sinks import QuietServer, serve_http, shut_down


@dataclass(frozen=True)
class Received:
    """One charge request as the provider saw it."""

    key: str
    replayed: bool
    status: int


class PaymentProviderServer:
    """The charges API on loopback, in a background thread."""

    def __init__(self, port: int, host: str = "127.0.0.1", api_key: str | None = None) -> None:
        self.host, self.port, self.api_key = host, port, api_key
        self._answers: dict[str, tuple[int, dict]] = {}
        self._references: dict[str, str] = {}  # a charge's reference -> its idempotency key
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()
        self._answering = threading.Event()  # cleared by hold_answers()
        self._answering.set()
        self._killed = False
        self.arrived = threading.Event()  # set by the first request after hold()
        self.failing: int | None = None
        self._fail_after = 0
        self.requests: list[Received] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._killed = False
        self._server = serve_http(
            self.host,
            self.port,
            "the local payment provider",
            {"POST": self._handle, "GET": self._lookup},
            server=QuietServer,
        )

    def stop(self) -> None:
        self.release()
        shut_down(self._server)
        self._server = None

    # --- steering, for tests ------------------------------------------------------------

    def hold(self) -> None:
        """Make every request wait (unanswered) until `release()`."""
        self.arrived.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()
        self._answering.set()

    def hold_answers(self) -> None:
        """Charge every request as usual, but keep its answer back until `release()` or
        `kill()`: the charge is made, the caller does not know it yet."""
        self.arrived.clear()
        self._answering.clear()

    def kill(self) -> None:
        """Die as a process does: nothing listens any more, and the requests in flight are
        cut off without an answer. The charges made stay in the record; `start()` again
        brings the provider back with it."""
        self._killed = True
        shut_down(self._server)
        self._server = None
        self.release()

    def fail_with(self, status: int, after: int = 0) -> None:
        """Answer every request with `status` (e.g. 503) until `recover()`, once `after`
        more charges went through."""
        with self._lock:
            self._fail_after = after
            self.failing = status

    def recover(self) -> None:
        with self._lock:
            self.failing = None

    def keys(self) -> list[str]:
        """Every idempotency key received, in order, repeats included."""
        with self._lock:
            return [r.key for r in self.requests]

    def charged(self) -> dict[str, int]:
        """How often each key was charged for real (not a replay, not a failure): once."""
        counts: dict[str, int] = {}
        with self._lock:
            for r in self.requests:
                if not r.replayed and r.status in (200, 402):
                    counts[r.key] = counts.get(r.key, 0) + 1
        return counts

    # --- the API ------------------------------------------------------------------------

    def _lookup(self, request: BaseHTTPRequestHandler) -> None:
        """GET /v1/charges?reference=R: the charge made for reference R, if any."""
        url = urlsplit(request.path)
        if url.path != "/v1/charges":
            return _send(request, 404, {"error": {"code": "not_found"}})
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _send(request, 401, {"error": {"code": "unauthorized"}})
        if self.failing is not None:
            return _send(request, self.failing, {"error": {"code": "unavailable"}})
        (reference,) = parse_qs(url.query).get("reference", [""])
        with self._lock:
            key = self._references.get(reference)
            answer = self._answers.get(key) if key is not None else None
        if answer is None:
            return _send(request, 200, {"data": []})
        status, body = answer
        if status == 200:
            made = {"id": body["id"], "status": "succeeded", "reference": reference}
        else:
            decline = body["error"].get("decline_code")
            made = {"status": "declined", "decline_code": decline, "reference": reference}
        _send(request, 200, {"data": [made]})

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length)
        if request.path != "/v1/charges":
            return _send(request, 404, {"error": {"code": "not_found"}})
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _send(request, 401, {"error": {"code": "unauthorized"}})
        key = request.headers.get("Idempotency-Key")
        if not key:
            return _send(request, 400, {"error": {"code": "idempotency_key_required"}})
        self.arrived.set()
        self._open.wait()
        with self._lock:
            failing = self.failing
            if failing is not None and self._fail_after > 0 and key not in self._answers:
                self._fail_after -= 1
                failing = None
            if failing is not None:
                self.requests.append(Received(key, False, failing))
        if failing is not None:
            return _send(request, failing, {"error": {"code": "unavailable"}})
        with self._lock:
            replayed = key in self._answers
            if not replayed:
                body = json.loads(raw or b"{}")
                self._answers[key] = _decide(key, body)
                self._references[str(body.get("reference", key))] = key
            status, body = self._answers[key]
            self.requests.append(Received(key, replayed, status))
        self._answering.wait()
        if self._killed:
            request.close_connection = True
            return  # the connection closes with no answer
        _send(request, status, body, replayed=replayed)


def _decide(key: str, body: dict) -> tuple[int, dict]:
    method = str(body.get("payment_method", ""))
    if method.startswith("pm_decline_"):
        code = method.removeprefix("pm_decline_")
        return 402, {"error": {"code": "card_declined", "decline_code": code}}
    return 200, {"id": "ch_" + hashlib.sha256(key.encode()).hexdigest()[:16], "status": "succeeded"}


def _send(request: BaseHTTPRequestHandler, status: int, body: dict, replayed: bool = False):
    data = json.dumps(body).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    if replayed:
        request.send_header("Idempotent-Replayed", "true")
    request.end_headers()
    request.wfile.write(data)


def main() -> None:
    """`python -m devstack.payments`: the provider on its own, e.g. in the compose stack."""
    import argparse
    import os
    import signal

    parser = argparse.ArgumentParser(prog="python -m devstack.payments", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    server = PaymentProviderServer(args.port, args.host, os.environ.get("PAYMENTS_API_KEY"))
    server.start()
    print(f"payment provider on {server.url}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()
