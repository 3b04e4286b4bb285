"""Small helpers for local ports."""

from __future__ import annotations

import socket

from core.errors import SchedulerError


class PortInUseError(SchedulerError):
    """A port the local stack needs is taken by another process."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port that nothing listens on right now (for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def require_free_port(
    port: int, what: str, host: str = "127.0.0.1", flag: str | None = None
) -> None:
    """Raise `PortInUseError` naming `what` (and `flag`, the option that moves it) if
    `port` is already taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUseError(
                f"port {port} on {host} is in use, so {what} cannot start; "
                "stop whatever listens there or choose another port"
                + (f" with {flag} (make run ARGS='{flag} N')" if flag else "")
            ) from None
