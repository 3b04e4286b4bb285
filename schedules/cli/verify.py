"""`python -m schedules verify`: the server's own fire times against the catalog's, every
divergence printed, with exit codes for a CI job or a probe."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime, timedelta

from core.errors import SchedulerError, TemporalUnreachableError
from schedules import progress
from schedules.catalog.model import JobSpec, load_catalog
from schedules.catalog.times import utc_text
from schedules.cli import context as cli
from schedules.health.verify import DEFAULT_DAYS, FULL_CHECK, Divergence, Verdict, verify_jobs
from timing import TZDATA_VERSION, zone

NAME = "verify"
HELP = "compare the server's own fire times with the catalog's; print every divergence"
DESCRIPTION = (
    "For each job (default: all), ask the Temporal server for the times its "
    "schedule fires (ListScheduleMatchingTimes) over the next --days and compare them "
    "with the catalog's intended fire times (the project's DST rules, its tz database). "
    f"Every divergence is printed with its local date. A job with more than {FULL_CHECK:,} "
    "fire times in the range is compared on the days around its zone's offset changes "
    "and the 1st of each month."
)
EXIT_CODES = (
    "exit codes: 0 the server fires every intended time and no other; 1 at least one "
    "divergence; 2 cannot tell (bad input, an invalid catalog, an unknown job, a job "
    "without a managed schedule, Temporal unreachable)"
)
MAX_DAYS = 3660  # ten years: about what a UTC-compiled spec covers
_SHOWN = 12  # a day with more times than this shows only those that differ


class CannotTellError(SchedulerError):
    """`verify` could not compare (exit 2)."""


def _clock(instant: datetime, timezone: str) -> str:
    """`02:00 -03 (05:00Z)`."""
    shape = "%H:%M" if instant.second == 0 else "%H:%M:%S"
    local = instant.astimezone(zone(timezone))
    return f"{local.strftime(shape)} {local.tzname()} ({instant.astimezone(UTC).strftime(shape)}Z)"


def _times(times: tuple[datetime, ...], timezone: str) -> str:
    return ", ".join(_clock(t, timezone) for t in times) if times else "none"


def divergence_line(d: Divergence) -> str:
    """`2027-09-05: intended 02:00 -03 (05:00Z); server none`."""
    if len(d.intended) + len(d.server) <= _SHOWN:
        return (
            f"{d.day}: intended {_times(d.intended, d.timezone)}; "
            f"server {_times(d.server, d.timezone)}"
        )
    return (
        f"{d.day}: {len(d.intended)} intended, {len(d.server)} on the server; not fired: "
        f"{_times(d.missing, d.timezone)}; fired, not intended: {_times(d.extra, d.timezone)}"
    )


def calendar_lines(verdict: Verdict, shown: int = 5) -> list[str]:
    """A calendar job's rule and what its calendar does in the range, the first few."""
    if not verdict.calendar:
        return []
    count = len(verdict.calendar_notes)
    lines = [f"{'':<14}calendar: {verdict.calendar}; {count} adjustment(s) in the range"]
    lines += [f"{'':<16}{note}" for note in verdict.calendar_notes[:shown]]
    if count > shown:
        lines.append(f"{'':<16}... and {count - shown} more (`next --from` lists them)")
    return lines


def verdict_lines(verdict: Verdict) -> list[str]:
    """A job's lines of the report: its verdict, then each divergence and the cause."""
    form = f" ({verdict.form})" if verdict.form else ""
    if verdict.status == "unknown":
        return [f"{'CANNOT TELL':<12}{verdict.job_id}: {verdict.why}"]
    if verdict.total is not None:
        scope = f"{verdict.total:,} fire time(s) compared, every one in the range"
    else:
        scope = (
            f"{verdict.checked:,} fire time(s) compared on {verdict.days} day(s) (more than "
            f"{FULL_CHECK:,} in the range: the days around offset changes and the 1st of "
            "each month)"
        )
    notes = calendar_lines(verdict)
    if verdict.status == "ok":
        return [f"{'ok':<12}{verdict.job_id}: as intended; {scope}{form}", *notes]
    lines = [
        f"{'DIVERGES':<12}{verdict.job_id}: {len(verdict.divergences)} day(s) differ; {scope}{form}"
    ]
    lines += [f"{'':<14}{divergence_line(d)}" for d in verdict.divergences]
    lines.append(f"{'':<14}why: {verdict.why}")
    lines += notes
    return lines


def format_verdicts(verdicts: list[Verdict], now: datetime, days: int) -> str:
    end = now + timedelta(days=days)
    head = (
        f"verify: {len(verdicts)} job(s), the server's fire times from {utc_text(now)} to "
        f"{utc_text(end)} ({days} days) against the catalog's, time zone database tzdata "
        f"{TZDATA_VERSION}"
    )
    lines = [head]
    for verdict in verdicts:
        lines += verdict_lines(verdict)
    count = Counter(v.status for v in verdicts)
    lines.append(
        f"summary: {count['ok']} as intended, {count['diverges']} diverge, "
        f"{count['unknown']} cannot tell"
    )
    return "\n".join(lines)


def exit_code(verdicts: list[Verdict]) -> int:
    statuses = {v.status for v in verdicts}
    if "diverges" in statuses:
        return 1
    return 2 if "unknown" in statuses else 0


def _jobs(args: argparse.Namespace) -> list[JobSpec]:
    catalog = {job.id: job for job in load_catalog(args.catalog, engine=cli.with_engine(args))}
    unknown = [job_id for job_id in args.jobs if job_id not in catalog]
    if unknown:
        raise CannotTellError(
            f"unknown job(s) {', '.join(map(repr, unknown))}; the catalog has: "
            f"{', '.join(catalog) or 'no jobs'}"
        )
    return [catalog[job_id] for job_id in args.jobs] if args.jobs else list(catalog.values())


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    if not 1 <= args.days <= MAX_DAYS:
        raise CannotTellError(f"--days: must be between 1 and {MAX_DAYS}, got {args.days}")
    jobs = _jobs(args)
    now = datetime.now(UTC).replace(microsecond=0)
    try:
        client = await ctx.client()
        bars = progress.for_stream()
        verdicts = await ctx.retrying(lambda: verify_jobs(client, jobs, now, args.days, bars))
    except TemporalUnreachableError as exc:
        raise CannotTellError(str(exc)) from None
    print(format_verdicts(verdicts, now, args.days))
    return exit_code(verdicts)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument("jobs", nargs="*", metavar="JOB", help="job ids (default: every job)")
    parser.add_argument(
        "--days",
        type=int,
        default=DEFAULT_DAYS,
        metavar="N",
        help=f"how many days ahead to compare (default {DEFAULT_DAYS}: a year and a month)",
    )
    return parser
