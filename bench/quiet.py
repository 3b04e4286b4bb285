"""Run a bench on a machine that other work shares, with that work in the background.

    python bench/quiet.py -- .venv/bin/python bench/fleet.py --job invoice-reminders

Starts the command in a session of its own and, every half second until it ends, holds
every other process at nice 19 and every other scheduler autogroup (Linux groups each
session's processes and shares the CPU between groups first, so nice alone does not reach
across sessions) at nice 19, while the command's processes, and those whose command line
holds a `--keep` mark (an embedded PostgreSQL it starts detached, say `/tmp/fleet-`), run
at nice 0. The other work still runs, on what the bench leaves; a bench's full section
says that it ran this way, with the load average. Needs the right to renice other
processes (root, or CAP_SYS_NICE). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

PROC = "/proc"


def parents() -> dict[int, int]:
    found = {}
    for entry in os.listdir(PROC):
        if entry.isdigit():
            try:
                with open(f"{PROC}/{entry}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue
            found[int(entry)] = int(text[text.rindex(")") + 2 :].split()[1])
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().decode(errors="replace")
    except OSError:
        return ""


def autogroup(pid: int) -> str | None:
    try:
        with open(f"{PROC}/{pid}/autogroup") as group:
            fields = group.read().split()
    except OSError:
        return None
    return fields[0] if fields else None


def kept(root: int, marks: list[str], tree: dict[int, int]) -> set[int]:
    """The command's processes: its descendants, and the marked ones with theirs."""
    keep = {root} | {pid for pid in tree if marks and any(m in command_line(pid) for m in marks)}
    grown = True
    while grown:
        grown = False
        for pid, parent in tree.items():
            if parent in keep and pid not in keep:
                keep.add(pid)
                grown = True
    return keep


def settle(root: int, marks: list[str]) -> None:
    tree = parents()
    keep = kept(root, marks, tree)
    ours = {autogroup(pid) for pid in keep} - {None}
    others = [pid for pid, parent in tree.items() if parent != 2 and pid not in (1, 2, os.getpid())]
    seen: set[str] = set()
    for pid in others:
        group = autogroup(pid)
        if group is None or group in seen:
            continue
        seen.add(group)
        try:
            with open(f"{PROC}/{pid}/autogroup", "w") as handle:
                handle.write("0" if group in ours else "19")
        except OSError:
            pass
    for pid in others:
        try:
            want = 0 if pid in keep else 19
            if os.getpriority(os.PRIO_PROCESS, pid) != want:
                os.setpriority(os.PRIO_PROCESS, pid, want)
        except OSError:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="append", default=[], help="a command-line mark")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: missing (give it after --)")
    child = subprocess.Popen(command, start_new_session=True)
    while child.poll() is None:
        settle(child.pid, args.keep)
        time.sleep(0.5)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
