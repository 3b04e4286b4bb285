"""Global options of `python -m schedules` go before or after the command."""

from __future__ import annotations

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


def test_validate_reads_the_catalog_given_after_it(tmp_path, capsys):
    path = tmp_path / "jobs.toml"
    path.write_text(CATALOG)
    assert main(["validate", "--catalog", str(path)]) == 0
    assert "catalog ok: 1 job(s): nightly" in capsys.readouterr().out
