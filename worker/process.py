"""What every entry point (`python -m worker`, `api`, `schedules`) shares: its argument
parser's one-line usage errors, and its exit after using a Temporal client."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line: `error: PROG: what (see --help)`,
    exit 2. Its subcommands' parsers are of this class too (`parser_class=Parser`)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def exit_process(code: int) -> NoReturn:
    """Flush output and exit without interpreter teardown.

    The Temporal SDK's Rust runtime keeps threads that can abort CPython's finalisation
    ("PyGILState_Release: thread state ... must be current", temporalio/sdk-python#300),
    turning a clean exit into SIGABRT. All work is done and flushed by now, so skip it.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
