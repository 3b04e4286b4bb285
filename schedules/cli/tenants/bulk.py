"""`tenants import FILE | export`: runtime schedules as JSON Lines, which export writes and
import reads back."""

from __future__ import annotations

import argparse
import sys
from contextlib import aclosing
from pathlib import Path

from schedules import tenants
from schedules.cli.context import BadInputError, Context
from schedules.cli.tenants.common import add_by, print_line, quotas, subcommand, url, who
from schedules.progress import for_stream


def configure(commands: argparse._SubParsersAction) -> None:
    importing = subcommand(
        commands,
        "import",
        "create the schedules of a JSON Lines file that do not exist yet (idempotent); "
        "every line is validated first, and nothing is written unless all are good",
        _import,
    )
    importing.add_argument("file", type=Path, metavar="FILE", help="JSON Lines ('-': stdin)")
    add_by(importing)

    exporting = subcommand(commands, "export", "print live schedules as JSON Lines", _export)
    exporting.add_argument("--tenant", help="only this tenant's")


def _lines(path: Path) -> list[bytes]:
    """The file's lines as bytes: the import reads each as UTF-8, so a line that is not
    is refused by its number."""
    if str(path) == "-":
        return sys.stdin.buffer.read().splitlines()
    try:
        return path.read_bytes().splitlines()
    except OSError as exc:
        raise BadInputError(f"FILE: cannot read {path}: {exc.strerror}") from None


async def _import(args: argparse.Namespace, ctx: Context) -> int:
    # A bar on a terminal while it checks and copies the lines; nothing when piped.
    report = await tenants.import_lines(
        url(ctx), _lines(args.file), by=who(args), quotas=quotas(ctx), progress=for_stream()
    )
    print(
        f"imported {report.lines} line(s): {report.created} created, "
        f"{report.unchanged} already there"
    )
    return 0


async def _export(args: argparse.Namespace, ctx: Context) -> int:
    # Closed here, not by the event loop at exit: a reader that went away (`| head`) raises
    # in the loop's body, and the export's transaction must end before the process does.
    async with aclosing(tenants.export(url(ctx), tenant=args.tenant)) as lines:
        async for line in lines:
            print_line(line)
    return 0
