"""Progress of the long operations (`sync`, `verify`, `backfill --wait`, `tenants import`):
a bar on a terminal, nothing otherwise.

The library functions take a `Progress` and call `phase(name, total)` then `advance()`
per item; the CLI passes `for_stream(sys.stderr)`, which draws tqdm bars on stderr only
when it is a terminal, so piped and machine-read output (stdout, `--json`) stays as it was.
"""

from __future__ import annotations

import sys
from typing import IO, Protocol

from tqdm import tqdm


class Progress(Protocol):
    def phase(self, name: str, total: int, unit: str = "job") -> None:
        """Start a phase of `total` items (the previous one ends)."""

    def advance(self, items: int = 1) -> None:
        """`items` more of the current phase are done."""

    def close(self) -> None:
        """End the current phase."""

    def write(self, line: str) -> None:
        """Print `line` on stdout, above the bar if one is drawn."""


class Quiet:
    """No progress shown: the default of every library function."""

    def phase(self, name: str, total: int, unit: str = "job") -> None:
        pass

    def advance(self, items: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def write(self, line: str) -> None:
        print(line, flush=True)


class Bars:
    """One tqdm bar per phase on `stream`."""

    def __init__(self, stream: IO[str], redraw_seconds: float = 0.1) -> None:
        self._stream = stream
        self._redraw = redraw_seconds
        self._bar: tqdm | None = None

    def phase(self, name: str, total: int, unit: str = "job") -> None:
        self.close()
        self._bar = tqdm(
            total=total,
            desc=name,
            unit=unit,
            file=self._stream,
            leave=False,
            mininterval=self._redraw,
            miniters=1,
        )

    def advance(self, items: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(items)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def write(self, line: str) -> None:
        tqdm.write(line, file=sys.stdout)


QUIET = Quiet()


def for_stream(stream: IO[str] | None = None) -> Progress:
    """Bars on `stream` (default stderr) if it is a terminal, else `QUIET`."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return Bars(stream) if isatty is not None and isatty() else QUIET
