"""Where a worker's CPU goes: a summary of the folded stacks `bench/fleet.py --profile DIR`
records with py-spy (one file per side and round).

    .venv/bin/python bench/profile_report.py DIR/ours-1.txt [--top 40] [--match TEXT]

Prints the share of samples each function is on the stack for (inclusive) and at the top
of (self), the heaviest first; `--match` keeps the frames whose text contains TEXT.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path


def read(path: Path) -> list[tuple[list[str], int]]:
    """(frames outermost first, samples) per line of a py-spy `--format raw` file."""
    stacks = []
    for line in path.read_text().splitlines():
        text, _, count = line.rpartition(" ")
        if text and count.isdigit():
            stacks.append((text.split(";"), int(count)))
    return stacks


def summarise(stacks: list[tuple[list[str], int]]) -> tuple[int, dict, dict]:
    total = sum(n for _, n in stacks)
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        for frame in set(frames):
            inclusive[frame] += n
        if frames:
            own[frames[-1]] += n
    return total, inclusive, own


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="")
    args = parser.parse_args(argv)
    total, inclusive, own = summarise(read(args.path))
    if not total:
        print("no samples", file=sys.stderr)
        return 1
    print(f"{total} samples")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"\n{title}:")
        shown = [(f, n) for f, n in counter.most_common() if args.match in f][: args.top]
        for frame, n in shown:
            print(f"{100 * n / total:6.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
