"""What the local stack's peers share: an HTTP server on loopback in a thread of its own
(the webhook receiver, the payment provider), and a folder of what a sink received, one
file per item named after when it arrived (the mail sink, the webhook receiver), listed by
`python -m devstack.mailsink` and `python -m devstack.webhooks`.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from devstack.ports import require_free_port

Answer = Callable[[BaseHTTPRequestHandler], None]


class QuietServer(ThreadingHTTPServer):
    """A caller that went away before its answer (a killed worker) is no error to print."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


def serve_http(
    host: str,
    port: int,
    what: str,
    answers: dict[str, Answer],
    server: type[ThreadingHTTPServer] = ThreadingHTTPServer,
) -> ThreadingHTTPServer:
    """A quiet HTTP server on `host:port`, serving in a daemon thread: each request of an
    HTTP method in `answers` (`"POST"`, `"GET"`) is answered by `answers[method](request)`,
    any other gets 501. `what` names it when the port is taken."""
    require_free_port(port, what, host)
    methods = {f"do_{method}": _answering(answer) for method, answer in answers.items()}
    serving = server((host, port), type("Handler", (_Handler,), methods))
    serving.daemon_threads = True
    threading.Thread(target=serving.serve_forever, daemon=True).start()
    return serving


def _answering(answer: Answer) -> Callable[[BaseHTTPRequestHandler], None]:
    # A function, so that it binds to the handler: `do_POST(handler)` calls `answer(handler)`.
    return lambda handler: answer(handler)


def shut_down(server: ThreadingHTTPServer | None) -> None:
    """Stop `server` (from `serve_http`) listening and close its socket; None is a no-op."""
    if server is not None:
        server.shutdown()
        server.server_close()


def newest(directory: Path, suffix: str, limit: int, line: Callable[[Path], str]) -> list[str]:
    """`line` of each of the newest `limit` files of `directory` ending in `suffix`, oldest
    first (their names start with when they arrived)."""
    files = sorted(directory.glob(f"*{suffix}"))[-limit:] if directory.is_dir() else []
    return [line(path) for path in files]


def show_newest(
    prog: str,
    description: str | None,
    default: Path,
    suffix: str,
    line: Callable[[Path], str],
    *,
    dir_help: str,
    count_help: str,
    total: str,
) -> None:
    """A sink's command line: `line` of each of the newest files of its folder (`--dir`,
    by default `default`), then `total` (formatted with their `count` and `directory`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--dir", type=Path, default=default, help=dir_help)
    parser.add_argument("-n", type=int, default=20, help=count_help)
    args = parser.parse_args()
    lines = newest(args.dir, suffix, args.n, line)
    count = len(list(args.dir.glob(f"*{suffix}"))) if args.dir.is_dir() else 0
    print("\n".join([*lines, total.format(count=count, directory=args.dir)]))
