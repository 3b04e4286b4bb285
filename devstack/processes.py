"""Stopping the local stack's child processes, one way for every one of them."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen, timeout: float) -> int:
    """SIGTERM `process` (it finishes what is in flight, then exits), SIGKILL after
    `timeout` seconds; its exit code. A process that has exited is left as it is."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode
