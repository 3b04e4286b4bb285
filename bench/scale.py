"""The operator's commands at N schedules, and catch-up planning at N missed slots.

For each `--jobs` size (several in one run, e.g. `--jobs 1000 10000`, so the growth shows
as a ratio), on a fresh headless Temporal dev server on a free port and a database of its
own in one embedded PostgreSQL (migrated with `worker.migrate.apply_migrations`):

1. first sync: `schedules.sync.apply.sync` in-process over a generated catalog
   (`bench/sync_schedules.py`'s `--catalog mixed|nightly-dst`): every schedule created;
   then the wait until schedule listing shows them all (visibility lag; timed on its own);
2. no-change sync right after: the report must name no create, update or delete, and no
   described schedule's `info.last_updated_at` (all of them, or `--sample` spread over the
   catalog) may be after the sync started: zero writes;
3. one completed run per job is recorded (its latest fire time), so `check` has rows to
   judge; then, as subprocesses with the catalog file and the settings in the environment,
   as an operator runs them: `python -m schedules list --json`,
   `python -m schedules check --json` and `python -m schedules verify [--days N]`.

And, once, with no Temporal involved: `activities.catchup.missed.plan_in` (what a scheduled run's
`begin_run` does first, in its transaction) for a job firing every minute whose timing took
effect `--slots` minutes ago with no row since, so every fire time but the run's own is
missed: per call, for catch-up `all` with a large `max_missed` (everything runs, nothing is
written) and `latest` (all but the newest recorded as skipped rows), each call rolled back.

Figures, the growth ratio between the sizes, the targets of issue 14 and the machine are
printed and appended to `--output` (bench/results/<UTC date>.md).

    .venv/bin/python bench/scale.py --jobs 1000 10000
    .venv/bin/python bench/scale.py --jobs 200 --slots 10 100 --no-output   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from catalog_file import write_catalog  # bench/ is sys.path[0] when run as a script
from invoice_reminders import load_queries
from results_file import today
from sync_schedules import (
    CATALOG_TEXT,
    CATALOGS,
    BenchError,
    Step,
    bench_main,
    catalog_tables,
    dev_server,
    expect_report,
    last_updated,
    positive,
    process_cpu,
    provenance,
    say,
    scratch_dir,
    timed,
    wait_listed,
)

from activities.catchup.missed import MAX_CONSIDERED, PlanInput, _decide_for, plan_in
from devstack import EmbeddedPostgres, free_port
from schedules.catalog.model import load_catalog
from schedules.health.verify import DEFAULT_DAYS
from schedules.sync.apply import sync
from timing import Timing
from worker.migrate import apply_migrations
from worker.settings import Settings

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUTPUT = today()
TASK_QUEUE = Settings.model_fields["temporal_task_queue"].default
Q = load_queries(HERE / "scale.sql")
TEMPLATE_DB = "scale_template"

# Issue 14's targets at 10,000 schedules, in seconds.
TARGETS = {"first": 600.0, "resync": 30.0, "check": 30.0}

# The planning benchmark's clock: any fixed instant (nothing here depends on today).
PLAN_NOW = datetime(2027, 3, 10, 12, 0, tzinfo=UTC)
PLAN_TIMING = Timing(cron="* * * * *", timezone="UTC")


# --- one size ------------------------------------------------------------------------------


@dataclass
class Size:
    jobs: int
    steps: dict[str, Step] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)


def run_cli(
    args: list[str], env: dict[str, str], server_pid: int, ok: tuple[int, ...] = (0,)
) -> tuple[subprocess.CompletedProcess[str], Step]:
    """Run `python -m schedules ARGS` as an operator would; time it with its own CPU."""
    load_before = os.getloadavg()[0]
    server_before = process_cpu(server_pid)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "schedules", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    step = Step(
        seconds, load_before, os.getloadavg()[0], cpu, process_cpu(server_pid) - server_before
    )
    if done.returncode not in ok:
        raise BenchError(
            f"`python -m schedules {' '.join(args)}` exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-800:]}"
        )
    return done, step


async def seed_runs(url: str, jobs: list[Any], now: datetime) -> int:
    """One completed run per job at its newest fire time before `now`."""
    ids, slots = [], []
    for job in jobs:
        last = job.timing.last_before(now)
        if last is not None:
            ids.append(job.id)
            slots.append(last)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(Q["seed_completed"], {"jobs": ids, "slots": slots})
    return len(ids)


def spread(ids: list[str], sample: int) -> list[str]:
    return ids if not sample or sample >= len(ids) else ids[:: max(1, len(ids) // sample)]


async def run_size(n: int, args: argparse.Namespace, pg: EmbeddedPostgres, workdir: Path) -> Size:
    size = Size(n)
    catalog = workdir / f"jobs-{n}.toml"
    write_catalog(catalog, catalog_tables(n, args.catalog))
    jobs = list(load_catalog(catalog))  # the file the commands read, as they read it
    ids = [job.id for job in jobs]
    url = pg.create_database(f"scale_{n}", template=TEMPLATE_DB)
    async with dev_server(workdir / f"temporal-{n}.log") as (client, pid):
        address = client.service_client.config.target_host
        say(f"{n:,}: dev server at {address}; {n:,} jobs in {catalog}")

        async def step(key: str, call):
            value, size.steps[key] = await timed(pid, call)
            say(f"{n:,}: {key} {size.steps[key].seconds:.2f}s")
            return value

        report = await step("first", lambda: sync(client, jobs, TASK_QUEUE))
        size.checks.append(expect_report(report, created=ids, what="(1) first sync"))
        if report.unverified:
            raise BenchError(f"(1) first sync: {len(report.unverified)} schedule(s) unverified")
        polls = await step("listed", lambda: wait_listed(client, set(ids), args.list_wait))
        size.steps["listed"].detail = f"{polls} list polls"

        started = datetime.now(UTC)
        report = await step("resync", lambda: sync(client, jobs, TASK_QUEUE))
        what = "(2) no-change sync"
        size.checks.append(expect_report(report, what=what))
        sample = spread(ids, args.sample)
        stamps = await step("describe", lambda: last_updated(client, sample))
        late = sorted(i for i, at in stamps.items() if at is not None and at >= started)
        if late:
            raise BenchError(f"{what}: last_updated_at is after its start on {late[:5]}")
        size.checks.append(
            f"{what}: info.last_updated_at is before the sync started on {len(sample):,} of "
            f"{n:,} schedules (described right after it): zero writes"
        )

        seeded = await seed_runs(url, jobs, datetime.now(UTC))
        env = {**os.environ, "TEMPORAL_ADDRESS": address, "DATABASE_URL": url}
        base = ["--catalog", str(catalog)]

        done, size.steps["list"] = run_cli([*base, "list", "--json"], env, pid)
        listed = json.loads(done.stdout)
        if len(listed["jobs"]) != n or listed["database_error"]:
            raise BenchError(f"list: {len(listed['jobs'])} jobs, {listed['database_error']}")
        with_run = sum(1 for entry in listed["jobs"] if entry.get("last_run"))
        size.checks.append(f"list --json: {n:,} jobs, {with_run:,} with a last run shown")
        say(f"{n:,}: list {size.steps['list'].seconds:.2f}s")

        check_args = [*base, "check", "--json"]
        if args.check_timeout:
            check_args += ["--timeout", f"{args.check_timeout:g}"]
        done, size.steps["check"] = run_cli(check_args, env, pid, ok=(0, 1, 2))
        checked = json.loads(done.stdout)
        alerts = sum(len(job["alerts"]) for job in checked["jobs"])
        size.steps["check"].detail = f"exit {done.returncode}"
        size.checks.append(
            f"check --json{' --timeout ' + format(args.check_timeout, 'g') if args.check_timeout else ''}: "
            f"exit {done.returncode}, {len(checked['jobs']):,} jobs judged over {seeded:,} "
            f"seeded runs, {alerts} alert(s), errors {checked.get('errors') or 'none'}"
        )
        say(f"{n:,}: check {size.steps['check'].seconds:.2f}s exit {done.returncode}")
        if done.returncode == 2:
            raise BenchError(f"check could not tell: {checked.get('errors')}")

        verify_args = [*base, "verify", "--days", str(args.verify_days)]
        done, size.steps["verify"] = run_cli(verify_args, env, pid)
        tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        size.checks.append(f"verify --days {args.verify_days}: exit 0; {tail}")
        say(f"{n:,}: verify {size.steps['verify'].seconds:.2f}s")
        return size


# --- catch-up planning ---------------------------------------------------------------------


@dataclass
class PlanCost:
    policy: str
    slots: int  # fire times since the timing took effect, the run's own included
    runs: int
    skipped: int
    call: list[float]  # plan_in, seconds per call
    decide: list[float]  # the pure part (`_decide_for`, no database), seconds per call


def plan_input(policy: str, slots: int) -> PlanInput:
    return PlanInput(
        job_name="bench-catchup",
        scheduled_at=PLAN_NOW,
        started_at=PLAN_NOW,
        workflow_id="bench-catchup-wf",
        run_id="bench-run",
        timing=PLAN_TIMING,
        catchup=policy,
        max_missed=10 * MAX_CONSIDERED if policy == "all" else None,
        # Took effect just after the fire time `slots` minutes before the own slot's minute.
        timing_since=PLAN_NOW - timedelta(minutes=slots) + timedelta(seconds=30),
    )


async def plan_costs(url: str, sizes: list[int], repeat: int) -> list[PlanCost]:
    costs = []
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for policy in ("all", "latest"):
            for slots in sizes:
                plan = plan_input(policy, slots)
                cost = PlanCost(policy, slots, 0, 0, [], [])
                for _ in range(repeat):
                    async with conn.transaction(force_rollback=True):
                        started = time.perf_counter()
                        result, _ = await plan_in(conn, plan, PLAN_NOW)
                        cost.call.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    decision = _decide_for(plan, PLAN_NOW, None, plan.timing_since, PLAN_NOW, set())
                    cost.decide.append(time.perf_counter() - started)
                cost.runs, cost.skipped = len(result.run), result.skipped
                if cost.runs + cost.skipped != slots or len(decision.run) != cost.runs:
                    raise BenchError(
                        f"plan {policy} {slots}: {cost.runs} run + {cost.skipped} skipped"
                    )
                costs.append(cost)
                say(f"plan {policy} {slots}: {statistics.median(cost.call) * 1000:.1f} ms")
    return costs


# --- the results ---------------------------------------------------------------------------


ROWS = (
    ("first", "(1) first sync: N creates (`schedules.sync.apply.sync` in-process)"),
    ("listed", "wait until listing shows all N (visibility lag; no command's time)"),
    ("resync", "(2) no-change sync right after: zero writes"),
    ("describe", "for reference: this script describing the sampled schedules (16 in flight)"),
    ("list", "`python -m schedules list --json`"),
    ("check", "`python -m schedules check --json`"),
    ("verify", "`python -m schedules verify`"),
)


def _ratio(small: Step | None, big: Step | None) -> str:
    if small is None or big is None or small.seconds <= 0:
        return ""
    return f"{big.seconds / small.seconds:.1f}x"


def command_table(sizes: list[Size]) -> tuple[str, list[str]]:
    header = "| step | " + " | ".join(f"N={s.jobs:,}: s (CPU client / server)" for s in sizes)
    lines = [header + (" | ratio |" if len(sizes) > 1 else " |")]
    lines.append("| --- |" + " ---: |" * len(sizes) + (" ---: |" if len(sizes) > 1 else ""))
    verdicts = []
    for key, label in ROWS:
        cells = []
        for s in sizes:
            st = s.steps.get(key)
            cells.append(
                f"{st.seconds:.2f} ({st.client_cpu:.1f} / {st.server_cpu:.1f})"
                + (f", {st.detail}" if st.detail else "")
                if st
                else "-"
            )
        ratio = (
            _ratio(sizes[0].steps.get(key), sizes[-1].steps.get(key)) if len(sizes) > 1 else None
        )
        lines.append(
            f"| {label} | " + " | ".join(cells) + (f" | {ratio} |" if ratio is not None else " |")
        )
        if key in TARGETS:
            for s in sizes:
                if s.jobs == 10_000 and key in s.steps:
                    seconds = s.steps[key].seconds
                    met = "met" if seconds < TARGETS[key] else "NOT met"
                    verdicts.append(
                        f"{label} at 10,000: {seconds:.2f} s, target under "
                        f"{TARGETS[key]:g} s: **{met}**"
                    )
    return "\n".join(lines), verdicts


def plan_table(costs: list[PlanCost]) -> str:
    lines = [
        "| catch-up | slots planned (missed + own) | run / recorded skipped | `plan_in` per call, "
        "ms (median) | per slot, µs | its pure part (`_decide_for`), ms | per slot, µs |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for c in costs:
        call, decide = statistics.median(c.call), statistics.median(c.decide)
        policy = f"all, max_missed {10 * MAX_CONSIDERED:,}" if c.policy == "all" else c.policy
        lines.append(
            f"| {policy} | {c.slots:,} | {c.runs} / {c.skipped} | {call * 1000:.2f} | "
            f"{call / c.slots * 1e6:.0f} | {decide * 1000:.2f} | {decide / c.slots * 1e6:.0f} |"
        )
    return "\n".join(lines)


def render(
    sizes: list[Size],
    costs: list[PlanCost],
    args: argparse.Namespace,
    machine: dict[str, str],
    when: datetime,
    load_start: tuple[float, float, float],
) -> str:
    table, verdicts = command_table(sizes)
    checks = "\n".join(f"- N={s.jobs:,}, {c}" for s in sizes for c in s.checks)
    verdict_lines = "\n".join(f"- {v}" for v in verdicts) or "- (no 10,000 run: no verdict)"
    plans = plan_table(costs) if costs else "(skipped)"
    ns = ", ".join(f"{s.jobs:,}" for s in sizes)
    return f"""
## Scale: run of {when:%Y-%m-%d %H:%M} UTC, {ns} schedules ({args.catalog})

Written by `bench/scale.py` (see its docstring). Command, from the repository root:

{provenance(machine, load_start)}

Commands at each size (wall seconds; in brackets the CPU seconds of the client, i.e. this
process for in-process steps or the command's own process, and of the dev server; ratio
= the largest size over the smallest):

{table}

Targets (issue 14, at 10,000 schedules):

{verdict_lines}

Checks (every one passed, or there would be no figures):

{checks}

Catch-up planning: `activities.catchup.missed.plan_in` for a job firing every minute (UTC) whose
timing took effect the given number of minutes before the run's own slot, no row since
(each call in a transaction rolled back; median of {args.plan_repeat}):

{plans}

- Generated jobs (`--catalog {args.catalog}`): kind invoice-reminders, distinct ids and
  params; {CATALOG_TEXT[args.catalog]}
- Each size has a fresh headless Temporal dev server (in memory) on a free port and its
  own database in one embedded PostgreSQL, on this machine, so client, servers and other
  work share its {machine["CPUs (nproc)"]} CPUs.
- `list`, `check` and `verify` run as `python -m schedules --catalog FILE ...`
  subprocesses (interpreter start-up, catalog parsing and connecting included) with
  TEMPORAL_ADDRESS and DATABASE_URL in the environment; `check` after one completed run
  per job was recorded. `verify` compares {args.verify_days} days ahead (the default is
  {DEFAULT_DAYS}).
"""


# --- the command line ----------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--jobs", type=positive, nargs="+", default=[1000], help="schedule counts, each a run"
    )
    parser.add_argument("--catalog", choices=CATALOGS, default="mixed")
    parser.add_argument(
        "--sample",
        type=int,
        default=1000,
        help="check last_updated_at on about this many schedules after (2) (0: all)",
    )
    parser.add_argument(
        "--verify-days", type=positive, default=DEFAULT_DAYS, help="verify's --days"
    )
    parser.add_argument(
        "--check-timeout",
        type=float,
        default=0,
        help="check's --timeout (0: its default)",
    )
    parser.add_argument(
        "--slots", type=positive, nargs="*", default=[10, 100, 1000], help="planning sizes"
    )
    parser.add_argument("--plan-repeat", type=positive, default=20)
    parser.add_argument("--list-wait", type=float, default=600.0, metavar="SECONDS")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-output", action="store_true", help="print the results only")
    return parser.parse_args(argv)


async def bench(args: argparse.Namespace) -> tuple[list[Size], list[PlanCost]]:
    with scratch_dir("bench-scale-", "the servers' logs") as workdir:
        os.chmod(workdir, 0o755)  # the embedded PostgreSQL may run as a user of its own
        pg = EmbeddedPostgres(workdir / "pg" / "data", free_port())
        try:
            pg.start()
            pg.create_database(TEMPLATE_DB)
            apply_migrations(pg.url(TEMPLATE_DB))
            costs = []
            if args.slots:
                url = pg.create_database("scale_plan", template=TEMPLATE_DB)
                costs = await plan_costs(url, args.slots, args.plan_repeat)
            return [await run_size(n, args, pg, workdir) for n in args.jobs], costs
        finally:
            pg.stop("fast")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return bench_main(args, bench, lambda result, *context: render(*result, args, *context))


if __name__ == "__main__":
    sys.exit(main())
