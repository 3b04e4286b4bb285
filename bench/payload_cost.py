"""What a run's payload bytes cost the Temporal server: raw workflows with and without them.

Two kinds of worker serve the same raw workflow (one no-op activity, as `bench/fleet_raw.py`)
on task queues of their own: `bare` passes and returns nothing, `padded` passes the
workflow and its activity `--bytes-in` bytes in all and returns `--bytes-out` (by default
what ours' runs carry in `bench/fleet.py`: 1,130 and 660). Each round starts `--runs`
workflows of each kind at once, in an order that alternates, and counts the dev server's CPU
(pinned to a core of its own) from the first start to the last result. The figure is the
paired difference, round by round: the rounds of one kind alone move by a tenth.

    .venv/bin/python bench/payload_cost.py            # 8 rounds of 300 runs a kind
    .venv/bin/python bench/payload_cost.py --no-output

Results are appended to bench/results/<UTC date>.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import run_cost  # noqa: E402
from results_file import today  # noqa: E402
from sync_schedules import describe_machine, provenance, write_results  # noqa: E402

from devstack import TemporalDevServer, free_port  # noqa: E402

KINDS = ("bare", "padded")


@activity.defn
async def noop(data: str) -> str:
    """Return as many bytes as the worker was told to (`PAYLOAD_OUT`)."""
    return "y" * int(os.environ.get("PAYLOAD_OUT", "0"))


@workflow.defn(sandboxed=False)
class PayloadWorkflow:
    @workflow.run
    async def run(self, data: str) -> str:
        return await workflow.execute_activity(
            noop, data, start_to_close_timeout=timedelta(seconds=30)
        )


async def serve(address: str, task_queue: str) -> None:
    client = await Client.connect(address)
    async with Worker(
        client, task_queue=task_queue, workflows=[PayloadWorkflow], activities=[noop]
    ):
        print("worker ready", flush=True)
        await asyncio.Event().wait()


async def batch(client: Client, kind: str, data: str, n: int, tag: str) -> None:
    """Start `n` workflows of `kind` at once (50 starts in flight), wait for every result."""
    limit = asyncio.Semaphore(50)

    async def start(i: int):
        async with limit:
            return await client.start_workflow(
                PayloadWorkflow.run,
                data,
                id=f"{tag}-{i}-{uuid.uuid4().hex[:6]}",
                task_queue=f"q-{kind}",
            )

    handles = await asyncio.gather(*(start(i) for i in range(n)))
    await asyncio.gather(*(h.result() for h in handles))


async def measure(args: argparse.Namespace, workdir: Path) -> dict[str, list[float]]:
    """Server CPU ms per run of each kind, a figure per round."""
    cores = sorted(os.sched_getaffinity(0))
    server_cores = {cores[0]} if len(cores) > 1 else set(cores)
    other_cores = set(cores[1:]) or server_cores
    server = TemporalDevServer(free_port(), None, None, workdir / "temporal.log")
    os.sched_setaffinity(0, server_cores)
    server.start()
    os.sched_setaffinity(0, other_cores)
    procs = []
    try:
        await server.wait_ready()
        client = await Client.connect(server.address)
        # Each side's activity result half the bytes out, the workflow's result the other.
        sizes = {"bare": (0, 0), "padded": (args.bytes_in // 2, args.bytes_out // 2)}
        logs = []
        for kind in KINDS:
            for i in range(args.workers):
                log = workdir / f"{kind}-{i}.log"
                env = os.environ | {"PAYLOAD_OUT": str(sizes[kind][1])}
                argv = [sys.executable, __file__, "--serve", server.address, f"q-{kind}"]
                procs.append(subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=-2))
                logs.append(log)
        while not all("worker ready" in log.read_text() for log in logs):
            await asyncio.sleep(0.2)
        cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for round_ in range(args.rounds + 1):  # the first round warms up, not counted
            for kind in KINDS if round_ % 2 else reversed(KINDS):
                before = run_cost.tree_cpu_seconds(server.process.pid)
                await batch(client, kind, "x" * sizes[kind][0], args.runs, f"{kind}-{round_}")
                used = run_cost.tree_cpu_seconds(server.process.pid) - before
                if round_:
                    cpu[kind].append(used / args.runs * 1000)
                print(f"round {round_} {kind}: {used / args.runs * 1000:.1f} ms", file=sys.stderr)
        return cpu
    finally:
        for proc in procs:
            proc.terminate()
        server.stop()


def render(args: argparse.Namespace, load, cpu: dict[str, list[float]], took: float) -> str:
    diffs = [p - b for b, p in zip(cpu["bare"], cpu["padded"], strict=True)]
    more = sum(d > 0 for d in diffs)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    # Counted before the bench pinned itself to the other cores (`nproc` would say fewer).
    machine = describe_machine() | {"CPUs": str(os.cpu_count())}
    machine.pop("CPUs (nproc)", None)
    rows = "\n".join(
        f"| {kind} | {', '.join(f'{v:.1f}' for v in cpu[kind])} | {statistics.median(cpu[kind]):.1f} |"
        for kind in KINDS
    )
    return f"""
## Payload cost on the server: run of {when}

Written by `bench/payload_cost.py` (see its docstring): {args.runs} raw workflows of each
kind a round, started at once, {args.rounds} rounds after one not counted; `padded`
carries {args.bytes_in} bytes in and {args.bytes_out} out, `bare` none. The dev server on
a core of its own. Took {took:.0f} s. Command, from the repository root:

{provenance(machine, load)}

| kind | server CPU ms per run (each round) | median |
| --- | --- | ---: |
{rows}

Paired difference (padded - bare, round by round): mean {statistics.mean(diffs):+.1f} ms
a run, median {statistics.median(diffs):+.1f} ms; padded cost more in {more} of
{len(diffs)} rounds.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bytes-in", type=int, default=1130)
    parser.add_argument("--bytes-out", type=int, default=660)
    parser.add_argument("--output", type=Path, default=today())
    parser.add_argument("--no-output", action="store_true", help="print only")
    parser.add_argument("--serve", nargs=2, metavar=("ADDRESS", "QUEUE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(serve(*args.serve))
        return 0
    load = os.getloadavg()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="payload-") as tmp:
        cpu = asyncio.run(measure(args, Path(tmp)))
    section = render(args, load, cpu, time.monotonic() - began)
    print(section)
    if not args.no_output:
        write_results(args.output, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
