"""`python -m schedules compat`: are runs of retired code still open? (`schedules.compat`)"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from core.errors import SchedulerError, TemporalUnreachableError
from schedules.cli import context as cli
from schedules.compat import Found, open_retired_runs

NAME = "compat"
HELP = "report open runs that only retired code (a removed patch branch, type) could finish"
DESCRIPTION = (
    "For each compatibility shim a release removed (docs/architecture.md, Compatibility "
    "shims and patches), ask Temporal's visibility, in this namespace (TEMPORAL_NAMESPACE), "
    "for runs of the workflow types it served that are still running and started before "
    "the release that stopped starting them. Read-only; run it once per namespace."
)
EXIT_CODES = (
    "exit codes: 0 none open (retired_runs_open 0); 1 at least one open (listed); 2 cannot "
    "tell (Temporal unreachable, bad input)"
)


class CannotTellError(SchedulerError):
    """`compat` could not ask (exit 2)."""

    exit_code = 2


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument(
        "--started-before",
        type=_instant,
        metavar="TIME",
        help="look for runs started before TIME (ISO 8601 with an offset) instead of each "
        "release's date: when the fleet deployed the release that retired them",
    )
    cli.add_json(parser)
    return parser


def _instant(text: str) -> datetime:
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time like 2026-12-01T12:00:00Z: {text[:60]!r}"
        ) from None
    if found.tzinfo is None:
        raise argparse.ArgumentTypeError(f"give the offset (Z or +01:00): {text[:60]!r}")
    return found.astimezone(UTC)


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    try:
        client = await ctx.client()
        found = await ctx.retrying(
            lambda: open_retired_runs(client, started_before=args.started_before)
        )
    except TemporalUnreachableError as exc:
        raise CannotTellError(str(exc)) from None
    total = sum(f.count for f in found)
    if args.json:
        cli.print_json(
            {
                "namespace": client.namespace,
                "retired_runs_open": total,
                "rules": [
                    {
                        "retired": f.retired.what,
                        "query": f.query,
                        "open": f.count,
                        "workflow_ids": list(f.workflow_ids),
                    }
                    for f in found
                ],
            }
        )
    else:
        print(format_found(client.namespace, found))
    return 1 if total else 0


def format_found(namespace: str, found: list[Found]) -> str:
    """`retired_runs_open: N in namespace NS`, then one line per rule (and its open runs)."""
    total = sum(f.count for f in found)
    lines = [f"retired_runs_open: {total} in namespace {namespace}"]
    for f in found:
        state = "none open" if not f.count else f"{f.count} open"
        lines.append(f"  {state}: {f.retired.what}")
        lines.append(f"    query: {f.query}")
        lines += [f"    {workflow_id}" for workflow_id in f.workflow_ids]
        if f.count > len(f.workflow_ids):
            lines.append(f"    ... and {f.count - len(f.workflow_ids)} more")
    return "\n".join(lines)
