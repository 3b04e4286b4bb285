"""Shared plumbing of the `python -m schedules` commands: settings, client, retries, and the
argument types and errors several commands use."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import math
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio.client import Client

from core.errors import CatalogError, SchedulerError, setting_hint
from core.text import unprintable
from schedules.catalog.durations import parse_duration
from schedules.catalog.model import JobSpec, load_valid_jobs
from schedules.catalog.times import parse_time
from schedules.server.retry import FAIL_FAST_SECONDS, Retry
from worker.client import connect
from worker.settings import Settings, load_settings

T = TypeVar("T")

# One connection attempt while waiting for a starting cluster.
_ATTEMPT_SECONDS = 10.0


def _seconds(text: str, allow_zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero) or value > 86400:
        span = "from 0 to 86400" if allow_zero else "above 0, at most 86400"
        raise argparse.ArgumentTypeError(f"must be a number of seconds {span}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, more than 0, at most a day."""
    return _seconds(text, allow_zero=False)


def non_negative_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds from 0 to a day."""
    return _seconds(text, allow_zero=True)


class Context:
    """Settings and a Temporal client, made on first use, with retries for a starting cluster.

    By default a command fails fast: transient Temporal errors are retried for
    `wait_seconds` (5), no connection attempt outlasts what is left of them, and a
    refused connection (nothing listens at the address) is final at once. With
    `waiting_for_cluster` (a write given `--wait-for-cluster SECONDS`) a refused connection
    is retried too, for `wait_seconds`, and stderr says once what it waits for. The
    library calls get `retry`, the policy itself.
    """

    def __init__(
        self, wait_seconds: float = FAIL_FAST_SECONDS, *, waiting_for_cluster: bool = False
    ) -> None:
        self.retry = Retry(
            wait_seconds,
            waiting_for_cluster=waiting_for_cluster,
            address=lambda: self.settings.temporal_address,
            announce=self._announce,
            setting=lambda: setting_hint("TEMPORAL_ADDRESS"),
        )
        self._settings: Settings | None = None
        self._client: Client | None = None
        self._connecting = asyncio.Lock()  # one connection for every concurrent caller

    @property
    def wait_seconds(self) -> float:
        return self.retry.seconds

    @wait_seconds.setter
    def wait_seconds(self, seconds: float) -> None:
        self.retry.seconds = seconds

    @property
    def waiting_for_cluster(self) -> bool:
        return self.retry.waiting_for_cluster

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    def _announce(self, cause: str) -> None:
        print(
            f"waiting up to {self.wait_seconds:g}s (--wait-for-cluster) for Temporal at "
            f"{self.retry.address()} to answer{cause}",
            file=sys.stderr,
            flush=True,
        )

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run `call`, retrying transient Temporal errors for up to `wait_seconds`."""
        return await self.retry(call)

    async def _connect(self, timeout: float) -> Client:
        try:
            return await asyncio.wait_for(connect(self.settings), timeout=timeout)
        except TimeoutError:
            raise RuntimeError(f"no answer within {timeout:g}s") from None

    async def client(self) -> Client:
        async with self._connecting:
            if self._client is None:
                # No attempt outlasts the budget (an address that never answers), and
                # one waiting for a cluster gives up on a silent attempt after a while.
                cap = _ATTEMPT_SECONDS if self.waiting_for_cluster else None
                self._client = await self.retry.within(self._connect, attempt_cap=cap)
        return self._client


Handler = Callable[[argparse.Namespace, Context], Awaitable[int]]

CLUSTER_WAIT_HELP = (
    "if Temporal is unreachable or still starting, keep trying for up to this long, saying "
    "so on stderr (default: fail within about 5s); may come before or after the command"
)


def add_cluster_wait(parser: argparse.ArgumentParser) -> None:
    """Give a command that writes `--wait-for-cluster SECONDS` (read-only ones fail fast)."""
    parser.add_argument(
        "--wait-for-cluster",
        dest="cluster_wait",
        type=non_negative_seconds,
        default=argparse.SUPPRESS,  # keep a value given before the command
        metavar="SECONDS",
        help=CLUSTER_WAIT_HELP,
    )
    parser.set_defaults(waits_for_cluster=True)


def with_engine(args: argparse.Namespace) -> bool:
    """Whether the command reads the engine's jobs beside the catalog file (all but
    `--without-engine`)."""
    return not getattr(args, "without_engine", False)


def catalog_jobs(args: argparse.Namespace, job_id: str | None = None) -> dict[str, JobSpec]:
    """The valid jobs of the catalog the command was given (`--catalog`, with the engine's
    unless `--without-engine`) by id, for a command that reads the record or acts on one
    job: an invalid entry is left out with one warning line on stderr, unless it is
    `job_id`, the job asked for, whose first problem is the error. `sync` and `validate`
    refuse the whole catalog instead (`load_catalog`)."""
    jobs, broken = load_valid_jobs(getattr(args, "catalog", None), engine=with_engine(args))
    if job_id in broken:
        more = len(broken[job_id]) - 1
        raise CatalogError(
            f"{broken[job_id][0]}"
            + (f" (and {more} more problem(s))" if more else "")
            + "; `python -m schedules validate` lists every problem"
        )
    if broken:
        names = ", ".join(repr(name) for name in broken)
        print(
            f"warning: {len(broken)} invalid catalog entr{'y' if len(broken) == 1 else 'ies'} "
            f"left out ({names}); `python -m schedules validate` lists the problems",
            file=sys.stderr,
        )
    return {job.id: job for job in jobs}


class UnknownJobError(SchedulerError):
    """A job id the catalog does not have."""


class BadInputError(SchedulerError):
    """An argument the command cannot use (a time it cannot read, an empty range ...)."""


def catalog_job(args: argparse.Namespace, job_id: str) -> JobSpec:
    """The catalog's job `job_id` (`catalog_jobs` of the others), or `UnknownJobError`."""
    jobs = catalog_jobs(args, job_id)
    if job_id not in jobs:
        raise UnknownJobError(
            f"unknown job {job_id!r}; the catalog has: {', '.join(jobs) or 'no jobs'}"
        )
    return jobs[job_id]


def command(
    subparsers: argparse._SubParsersAction,
    name: str,
    help: str,
    description: str,
    epilog: str,
    raw: bool = False,
) -> argparse.ArgumentParser:
    """The parser of one command, its help, description and exit codes; `raw` keeps the
    description's and epilog's line breaks."""
    options = {"formatter_class": argparse.RawDescriptionHelpFormatter} if raw else {}
    return subparsers.add_parser(name, help=help, description=description, epilog=epilog, **options)


def add_json(parser: argparse.ArgumentParser, help: str = "print one JSON document") -> None:
    parser.add_argument("--json", action="store_true", help=help)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


def duration_type(allow_zero: bool, example: str) -> Callable[[str], timedelta]:
    """An argparse type: a catalog-style duration ("90s", "15m", "24h"), above 0 or from 0."""

    def duration(text: str) -> timedelta:
        try:
            value = parse_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if (
            not isinstance(value, timedelta)
            or value < timedelta(0)
            or (value == timedelta(0) and not allow_zero)
        ):
            raise argparse.ArgumentTypeError(f"must be {example}, got {text!r}")
        return value

    return duration


def count(text: str) -> int:
    """An argparse type: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def shown_text(text: str) -> str:
    """An argparse type: text an operator's terminal will print (a note, a `--by`), so no
    control characters (`core.text`)."""
    if unprintable(text) is not None:
        raise argparse.ArgumentTypeError(f"must hold no control characters, got {text[:80]!r}")
    return text


def operator(by: str | None) -> str:
    """Who makes a change: `--by WHO` if given, else `cli:<login name>`."""
    if by is not None:
        return by
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def database_url(ctx: Context) -> str:
    """The connection string the commands read PostgreSQL with (`DATABASE_URL`)."""
    return ctx.settings.database_url.get_secret_value()


COMMON_EXIT = "2 bad input (usage, an invalid catalog, an unknown job id)"


def add_job(parser: argparse.ArgumentParser, help: str = "job id") -> None:
    parser.add_argument("job", metavar="ID", help=help)


def job_time(text: str, job: JobSpec, now: datetime, option: str) -> datetime:
    """`text` read as a time of `job` (in its zone unless it names an offset), or
    `BadInputError` naming `option`."""
    try:
        return parse_time(text, job.timezone, now)
    except ValueError as exc:
        raise BadInputError(f"{option}: {exc}") from None


def add_timeout(parser: argparse.ArgumentParser, default: float | None, help: str) -> None:
    """`--timeout SECONDS`: how long the command waits for what it asked for."""
    parser.add_argument(
        "--timeout", type=positive_seconds, default=default, metavar="SECONDS", help=help
    )
