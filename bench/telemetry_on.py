"""`--telemetry`: run the benchmark's in-process worker with traces and metrics on.

It is the worker's own set-up (`worker.telemetry.worker_telemetry`), fully on: every span
(workflow, activities, each fenced transaction) exported over OTLP/HTTP to a local receiver
that decodes and counts them, the Prometheus endpoint serving our metrics and the Temporal
SDK's, and a scraper reading it on an interval as Prometheus would (each scrape also runs
the outbox and last-success gauge query against the benchmark's database).
`BENCH_SCRAPE_INTERVAL=0` leaves the scraper out, to tell its cost from the rest.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from devstack import free_port
from worker.settings import Settings
from worker.telemetry import Telemetry, worker_telemetry


@dataclass
class TelemetryStats:
    spans: int = 0
    exports: int = 0
    scrapes: int = 0
    scrape_errors: int = 0
    scrape_seconds: list[float] = field(default_factory=list)

    def describe(self, scrape_interval: float) -> str:
        scrape_interval = float(os.environ.get("BENCH_SCRAPE_INTERVAL", scrape_interval))
        return (
            f"{self.spans:,} spans exported over OTLP/HTTP in {self.exports:,} requests to a "
            f"local receiver; /metrics scraped every {scrape_interval:g}s ({self.scrapes} "
            f"scrapes, {self.scrape_errors} failed, longest {max(self.scrape_seconds, default=0):.2f}s)"
        )


def _receiver(stats: TelemetryStats) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            count = sum(
                len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans
            )
            with lock:
                stats.spans += count
                stats.exports += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Receiver)


def _scrape_until(stop: threading.Event, port: int, interval: float, stats: TelemetryStats):
    while not stop.wait(interval):
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                r.read()
            stats.scrapes += 1
            stats.scrape_seconds.append(time.perf_counter() - started)
        except OSError:
            stats.scrape_errors += 1


@contextlib.asynccontextmanager
async def telemetry_on(
    temporal_address: str, database_url: str, scrape_interval: float
) -> AsyncIterator[tuple[Telemetry, TelemetryStats]]:
    """The worker's telemetry, all on, for this process; yields it and live counts."""
    stats = TelemetryStats()
    scrape_interval = float(os.environ.get("BENCH_SCRAPE_INTERVAL", scrape_interval))
    receiver = _receiver(stats)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{receiver.server_address[1]}"
    os.environ.setdefault("OTEL_SERVICE_NAME", "scheduled-jobs-bench")
    settings = Settings(
        temporal_address=temporal_address, database_url=database_url, metrics_port=free_port()
    )
    stop = threading.Event()
    scraper = threading.Thread(
        target=_scrape_until,
        args=(stop, settings.metrics_port, scrape_interval, stats),
        daemon=True,
    )
    try:
        async with worker_telemetry(settings) as telemetry:
            if scrape_interval > 0:
                scraper.start()
            yield telemetry, stats
            stop.set()
            if scraper.is_alive():
                scraper.join()
    finally:
        receiver.shutdown()
        receiver.server_close()
