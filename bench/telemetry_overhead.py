"""The cost of telemetry on the invoice-reminders job: the job with it off and on, alternated.

OpenTelemetry's global providers can be set once per process, so each measurement is its own
`bench/invoice_reminders.py --variants job` process, without and with `--telemetry`, in the
order off, on, on, off, off, on, ... (each pair in both orders, so a trend in the machine's
load weighs on both sides). The medians, the overhead and every run are appended to
`--output` (bench/results/<UTC date>.md) as a section with the machine and the command.

    .venv/bin/python bench/telemetry_overhead.py --pairs 3
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from results_file import append, today  # bench/ is sys.path[0] when run as a script

HERE = Path(__file__).resolve().parent
BENCH = HERE / "invoice_reminders.py"
TARGET = 0.05
FIGURES = (
    "workflow wall time",
    "job_executions started_at to finished_at",
    "CPU: the worker's process (all its threads)",
    "CPU: PostgreSQL (all its processes)",
    "CPU: Temporal dev server",
    "**CPU: all three**",
)
SHORT = ("wall", "execution", "worker CPU", "postgres CPU", "temporal CPU", "total CPU")

_WALL = re.compile(
    r"^\| job: ScheduledJobWorkflow, workflow wall time [^|]*\| [\d,]+ \| ([\d.]+) \|"
)
_EXECUTION = re.compile(
    r"^\| job: job_executions started_at to finished_at \| [\d,]+ \| ([\d.]+) \|"
)
_CPU = re.compile(
    r"^job: worker process CPU ([\d.]+)s, PostgreSQL CPU ([\d.]+)s, Temporal CPU ([\d.]+)s$",
    re.MULTILINE,
)
_CHUNKS = re.compile(r"\(chunk_size ([\d,]+), (\d+) chunks\)")


def run_once(invoices: int, telemetry: bool) -> tuple[tuple[float, ...], str]:
    """One bench process: its figures (see `FIGURES`) and its Markdown section."""
    command = [sys.executable, str(BENCH), "--invoices", str(invoices), "--variants", "job"]
    command += ["--no-output"] + (["--telemetry"] if telemetry else [])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench failed ({done.returncode}):\n{done.stderr[-3000:]}")
    wall = execution = None
    for line in done.stdout.splitlines():
        if m := _WALL.match(line):
            wall = float(m[1])
        elif m := _EXECUTION.match(line):
            execution = float(m[1])
    cpu = _CPU.search(done.stderr)
    if wall is None or execution is None or cpu is None:
        sys.exit(f"no job figures in the bench's output:\n{done.stdout[-3000:]}")
    worker, postgres, temporal = (float(x) for x in cpu.groups())
    figures = (wall, execution, worker, postgres, temporal, worker + postgres + temporal)
    return figures, done.stdout


def block(section: str, start: str, stop: str) -> str:
    """The lines of `section` from the one starting with `start` up to before `stop`."""
    text = section.split(start, 1)[1]
    return (start + text.split(stop, 1)[0]).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invoices", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=3, help="off/on pairs of runs")
    parser.add_argument("--output", type=Path, default=today())
    parser.add_argument("--no-output", action="store_true")
    args = parser.parse_args(argv)

    runs: dict[bool, list[tuple[float, ...]]] = {False: [], True: []}
    sections: dict[bool, str] = {}
    load_before = os.getloadavg()
    for pair in range(args.pairs):
        for telemetry in (False, True) if pair % 2 == 0 else (True, False):
            figures, section = run_once(args.invoices, telemetry)
            runs[telemetry].append(figures)
            sections[telemetry] = section
            shown = ", ".join(f"{n} {v:.2f}s" for n, v in zip(SHORT, figures, strict=True))
            mode = "on " if telemetry else "off"
            print(f"pair {pair + 1} telemetry {mode}: {shown}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()

    def median(telemetry: bool, index: int) -> float:
        return statistics.median(r[index] for r in runs[telemetry])

    rows = []
    for index, label in enumerate(FIGURES):
        off, on = median(False, index), median(True, index)
        rows.append(
            f"| {label} | {off:.2f} | {on:.2f} | {(on - off) / off:+.1%} "
            f"| {', '.join(f'{r[index]:.2f}' for r in runs[False])} "
            f"| {', '.join(f'{r[index]:.2f}' for r in runs[True])} |"
        )
    wall_off, wall_on = median(False, 0), median(True, 0)
    cpu_off, cpu_on = median(False, len(FIGURES) - 1), median(True, len(FIGURES) - 1)
    wall_overhead, cpu_overhead = (wall_on - wall_off) / wall_off, (cpu_on - cpu_off) / cpu_off
    met = "**met**" if cpu_overhead < TARGET else "**missed**"
    chunk_size, chunks = _CHUNKS.search(sections[False]).groups()
    on_note = next(
        line[2:] for line in sections[True].splitlines() if line.startswith("- **Telemetry on**")
    )
    python = os.path.relpath(sys.executable)
    command = shlex.join([python if not python.startswith("..") else sys.executable, *sys.argv])
    section = f"""
## Telemetry overhead, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: {args.invoices:,} invoices

Command, from the repository root (each run is `bench/invoice_reminders.py --variants job
--no-output`, with `--telemetry` for "on"; {args.pairs} pairs, order off/on then on/off):

```
{command}
```

{block(sections[False], "Machine:", "PostgreSQL settings:")}

| job, {args.invoices:,} invoices ({chunks} chunks of {chunk_size}) | off (s, median) | on (s, median) | overhead | off runs (s) | on runs (s) |
| --- | ---: | ---: | ---: | --- | --- |
{chr(10).join(rows)}

Target (telemetry under {TARGET:.0%}), judged on the job's CPU across the worker, PostgreSQL
and Temporal, which other work on the machine moves far less than wall time: {met},
{cpu_overhead:+.1%}. Wall time, median of {args.pairs} runs each: {wall_overhead:+.1%}.

- Off: the worker as before telemetry: no interceptor, no providers; the recording helpers
  call OpenTelemetry's no-op API.
- {on_note}
- CPU: this process's CPU time (`time.process_time()`: the worker, the SDK core and the
  telemetry threads) and the servers' from /proc (bench/stack_cpu.py), from the workflow's
  start to its result.
- Load average (1, 5, 15 min) before: {", ".join(f"{x:.2f}" for x in load_before)}; after:
  {", ".join(f"{x:.2f}" for x in load_after)} (on {os.cpu_count()} CPUs; the benchmark keeps
  about one busy, the rest is other work on the machine, which weighs on wall time).
"""
    print(section)
    if not args.no_output:
        append(args.output, section)
        print(f"results appended to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
