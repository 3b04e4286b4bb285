"""`bench/fleet.py --gc-probe`: how long each process's cyclic garbage collector runs.

On PYTHONPATH, Python imports this module at start in every process of the bench's sides
(`sitecustomize`). A callback times each collection and writes the totals, seconds in the
young generations and in full collections, to `$GC_PROBE_DIR/<pid>.json` after each one
(atomically: the bench reads them while the process runs). Every side's processes carry
the same probe, so its own cost weighs on each alike.
"""

import gc
import json
import os
import time

_DIR = os.environ.get("GC_PROBE_DIR")
_totals = {"young": 0.0, "full": 0.0, "full_count": 0}
_started = [0.0]


def _write() -> None:
    # With os's calls, not `open`: a collection can end in a workflow's sandbox, whose
    # `open` refuses to run there (the write was lost, and a traceback printed, each time).
    path = os.path.join(_DIR, f"{os.getpid()}.json")
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(_totals).encode())
    finally:
        os.close(fd)
    os.replace(path + ".tmp", path)


def _timed(phase: str, info: dict) -> None:
    now = time.perf_counter()
    if phase == "start":
        _started[0] = now
        return
    took = now - _started[0]
    if info["generation"] == 2:
        _totals["full"] += took
        _totals["full_count"] += 1
    else:
        _totals["young"] += took
    _write()


if _DIR:
    gc.callbacks.append(_timed)
