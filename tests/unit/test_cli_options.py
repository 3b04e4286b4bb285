"""Global options of `python -m schedules` go before or after the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from schedules.cli.main import build_parser, main

CATALOG = '[nightly]\nkind = "invoice-reminders"\ncron = "30 2 * * *"\ntimezone = "UTC"\n'


@pytest.mark.parametrize(
    "argv",
    [
        ["--catalog", "X", "validate"],
        ["validate", "--catalog", "X"],
        ["--catalog", "Y", "validate", "--catalog", "X"],
    ],
)
def test_catalog_before_or_after_the_command_the_last_one_wins(argv):
    args = build_parser().parse_args(argv)
    assert args.catalog == Path("X")


def test_options_left_out_after_the_command_keep_the_ones_before():
    args = build_parser().parse_args(["--debug", "--catalog", "X", "next", "nightly"])
    assert (args.debug, args.catalog) == (True, Path("X"))
    assert build_parser().parse_args(["list"]).debug is False


@pytest.mark.parametrize(
    "argv",
    [
        ["tenants", "--debug", "list"],
        ["tenants", "list", "--debug"],
        ["--debug", "tenants", "list"],
    ],
)
def test_a_subcommand_of_a_command_takes_them_too(argv):
    assert build_parser().parse_args(argv).debug is True


@pytest.mark.parametrize(
    "argv",
    [
        ["--wait-for-cluster", "5", "list"],
        ["list", "--wait-for-cluster", "5"],
        ["tenants", "list", "--wait-for-cluster", "5"],
    ],
)
def test_a_read_only_command_says_either_side_that_it_does_not_wait(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "does not wait for a cluster (only sync, trigger, backfill, pause, resume do)" in line


def test_a_write_waits_for_the_cluster_given_either_side():
    for argv in (["--wait-for-cluster", "7", "sync"], ["sync", "--wait-for-cluster", "7"]):
        args = build_parser().parse_args(argv)
        assert (args.cluster_wait, args.waits_for_cluster) == (7, True)


def test_validate_reads_the_catalog_given_after_it(tmp_path, capsys):
    path = tmp_path / "jobs.toml"
    path.write_text(CATALOG)
    assert main(["validate", "--catalog", str(path)]) == 0
    assert (
        "catalog ok: 1 job(s): nightly; and the engine's 5: outbox-relay" in capsys.readouterr().out
    )


def test_a_reader_that_went_away_ends_the_command_quietly(tmp_path):
    """`python -m schedules ... | head`: the pipe closes under the command; no error line."""
    path = tmp_path / "jobs.toml"
    path.write_text(CATALOG)
    read, write = os.pipe()
    os.close(read)  # closed before the command writes anything: its first write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "schedules", "next", "nightly", "-n", "50", "--catalog", path],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[2],
            # `next` asks Temporal whether the job is paused: nothing listens here, which
            # is one warning line, the times computed all the same.
            env=os.environ | {"TEMPORAL_ADDRESS": "127.0.0.1:1"},
        )
    finally:
        os.close(write)
    (warning,) = done.stderr.splitlines()  # and no error line for the pipe
    assert warning.startswith("warning: an operator's pause cannot be seen: cannot reach")
    assert done.returncode == 1, done.stderr
