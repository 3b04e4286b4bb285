"""`python -m schedules init DIR`: write a new project of scheduled jobs into DIR."""

from __future__ import annotations

import argparse
from pathlib import Path

from schedules.cli import context as cli
from schedules.starter import write_project

NAME = "init"
HELP = "write a new project of scheduled jobs: a job family, its catalog and its tests"
DESCRIPTION = (
    "Write a new project into DIR (new, or empty): pyproject.toml (depending on this "
    "release line of scheduled-jobs, declaring the package as a job family through the "
    "`scheduled_jobs.jobs` entry point), the package (a catalog job kind working in chunks, "
    "a runtime kind working a slot in one transaction, their params models, SQL and "
    "migration), catalog.toml, tests on real servers with scheduled-jobs' pytest plugin, "
    "and a README saying how to test and run it. Talks to no server."
)
EXIT_CODES = (
    "exit codes: 0 written; 2 bad input (DIR not empty or not a directory, a name that "
    "gives no Python package name or hides one of scheduled-jobs' or the standard "
    "library's); nothing is written then"
)


def configure(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = cli.command(subparsers, NAME, HELP, DESCRIPTION, EXIT_CODES)
    parser.add_argument("directory", metavar="DIR", type=Path, help="where to write it")
    parser.add_argument(
        "--name",
        help="the project's name, which names its package ('-' and '.' become '_'); "
        "default: DIR's name",
    )
    return parser


async def run(args: argparse.Namespace, ctx: cli.Context) -> int:
    project = write_project(args.directory, args.name)
    print(f"wrote {len(project.files)} file(s) into {args.directory} (package {project.package}):")
    for path in project.files:
        print(f"  {path.relative_to(args.directory)}")
    print(f"next: cd {args.directory} && python -m pip install -e '.[test]' && python -m pytest")
    return 0
