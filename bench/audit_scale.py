"""`python -m schedules audit` over a recorded history of N slots (issue 18: 1,000,000 in
at most 10 minutes on this machine).

For each `--slots` size, in a database of its own in one embedded PostgreSQL (migrated with
`worker.migrate.apply_migrations`), with a headless Temporal dev server on a free port:

1. seed, set-based: N completed runs of `card-settlement` (every minute, UTC) ending an hour
   ago, each with its commit journal rows (a take-over, a completing chunk) and one
   delivered outbox message named by its execution and attempt; then 3 rows deleted (lost)
   and 2 forged at second 30 (unexpected);
2. run the command as an operator does, a subprocess with the settings in its
   environment: `python -m schedules audit --job card-settlement --from F --to T --json`,
   timed (wall clock, and peak RSS of the process), and check that it exits 1 naming
   exactly the 5 seeded anomalies.

The job has no schedule on the server: the audit judges it up to its last recorded slot,
and Temporal's visibility lists no run (its cost at scale is not measured here: 1,000,000
workflow runs cannot be created on the dev server in the time).

    .venv/bin/python bench/audit_scale.py --slots 1000 10000 100000 1000000
    .venv/bin/python bench/audit_scale.py --slots 1000 --no-output   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from invoice_reminders import load_queries  # bench/ is sys.path[0] when run as a script
from results_file import today
from sync_schedules import (
    BenchError,
    bench_main,
    dev_server,
    positive,
    provenance,
    say,
    scratch_dir,
)

from devstack import EmbeddedPostgres, free_port
from worker.migrate import apply_migrations

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUTPUT = today()
Q = load_queries(HERE / "audit_scale.sql")
JOB = "card-settlement"
TARGET = timedelta(minutes=10)


@dataclass
class Measure:
    slots: int
    seed_seconds: float
    audit_seconds: float
    peak_rss_mib: float
    findings: dict[str, int]
    fire_times: int
    rows: int


def seed(url: str, n: int, now: datetime) -> tuple[datetime, datetime, list[datetime]]:
    first = (now - timedelta(hours=1) - timedelta(minutes=n)).replace(second=0, microsecond=0)
    last = first + timedelta(minutes=n - 1)
    lost = [first + timedelta(minutes=n // k) for k in (2, 3, 5)]
    unexpected = [first + timedelta(minutes=n // k, seconds=30) for k in (4, 7)]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(Q["seed_history"], {"job": JOB, "first": first, "n": n})
        conn.execute(Q["seed_anomalies"], {"job": JOB, "lost": lost, "unexpected": unexpected})
        conn.execute("VACUUM ANALYZE")
    return first, last, lost + unexpected


def audit(url: str, address: str, first: datetime, last: datetime) -> tuple[int, list, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "DATABASE_"))}
    env |= {"TEMPORAL_ADDRESS": address, "DATABASE_URL": url}
    argv = [sys.executable, "-m", "schedules", "audit", "--job", JOB, "--json"]
    argv += ["--from", first.isoformat(), "--to", (last + timedelta(minutes=1)).isoformat()]
    argv += ["--timeout", "600"]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise BenchError(f"audit exited {done.returncode}: {done.stderr.strip()}")
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], took


async def run(args: argparse.Namespace) -> list[Measure]:
    measures = []
    with scratch_dir("bench-audit-", "the servers' logs") as workdir:
        pg = EmbeddedPostgres(workdir / "pg", free_port())
        pg.start()
        try:
            async with dev_server(workdir / "temporal.log") as (client, _pid):
                address = client.service_client.config.target_host
                for n in sorted(args.slots):
                    url = pg.create_database(f"audit_{n}")
                    apply_migrations(url)
                    started = time.monotonic()
                    first, last, seeded = seed(url, n, datetime.now(UTC))
                    seeding = time.monotonic() - started
                    say(f"{n:,} slots seeded in {seeding:.1f}s; auditing")
                    code, lines, took = audit(url, address, first, last)
                    *findings, summary = lines
                    found = sorted(datetime.fromisoformat(f["slot"]["utc"]) for f in findings)
                    if code != 1 or found != sorted(seeded):
                        raise BenchError(
                            f"{n:,} slots: expected the 5 seeded anomalies, got {findings}"
                        )
                    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
                    s = summary["summary"]
                    measures.append(
                        Measure(n, seeding, took, rss, s["by_kind"], s["fire_times"], s["rows"])
                    )
                    say(f"{n:,} slots audited in {took:.1f}s")
        finally:
            pg.stop("immediate")
    return measures


def render(measures: list[Measure], machine: dict[str, str], when: datetime, load) -> str:
    rows = "\n".join(
        f"| {m.slots:,} | {m.fire_times:,} | {m.rows:,} | {m.seed_seconds:.1f} | "
        f"{m.audit_seconds:.1f} | {m.peak_rss_mib:,.0f} | "
        f"{', '.join(f'{k} {v}' for k, v in m.findings.items())} |"
        for m in measures
    )
    biggest = max(measures, key=lambda m: m.slots)
    verdict = (
        f"{biggest.slots:,} slots audited in {biggest.audit_seconds:.0f}s: "
        f"{'within' if biggest.audit_seconds <= TARGET.total_seconds() else 'OVER'} the "
        f"target of {TARGET.total_seconds() / 60:.0f} minutes"
    )
    return f"""
## Audit at scale: run of {when:%Y-%m-%d %H:%M} UTC, {", ".join(f"{m.slots:,}" for m in measures)} slots

{provenance(machine, load)}

Each size: a database of its own seeded with that many completed minutely runs of
`{JOB}` (with their commit journal and outbox rows), 3 of them deleted and 2 forged at
second 30; `python -m schedules audit --job {JOB} --json` over the whole history, run as a
subprocess; it must exit 1 naming exactly the 5 seeded anomalies (it did, each size).
Peak RSS is the largest of the audit processes so far (sizes run smallest first).

| slots | fire times due | rows read | seed (s) | audit (s) | peak RSS (MiB) | findings |
| ---: | ---: | ---: | ---: | ---: | ---: | --- |
{rows}

- {verdict}
- Temporal's visibility is read too, but lists no run here (no schedule, no workflow runs
  were created at these sizes): its cost at scale is not in these figures.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=positive, nargs="+", default=[1000, 10000])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-output", action="store_true")
    args = parser.parse_args(argv)
    return bench_main(args, run, render)


if __name__ == "__main__":
    sys.exit(main())
