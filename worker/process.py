"""Process exit for entry points that used a Temporal client."""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


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
