"""The judge of ours' side of `bench/fleet.py`: `python -m schedules audit`, clean.

The project's rule: every bench that runs slots ends with the audit clean. The audit is
catalog-driven (it judges the jobs a catalog file names, from the ledger and Temporal), and
none of ours' jobs in the fleet is in the packaged catalog: each is its nightly-reconcile
under a name of its own. `OursCatalog` is their catalog, an entry per job ours ran, each
nightly-reconcile's own table (its upstream left out, as `fleet.bench_job` does) with the
timing of what the bench fired, so that the audit's oracle (`schedules/audit/oracle.py`)
expects exactly the slots the bench made:

- a job started **directly** (the direct and cost cases, the cost case's warm-up: a job
  per run, a direct start's slot being its start second): nightly-reconcile's cron with
  an `end_at` before the audited window. None of its fire times is due there, and its one
  row is a `direct` one, which has no fire time to match (`UNTIMED_ORIGINS`: exempt from
  `unexpected`). The audit judges of it what the ledger tells: a row left `running` whose
  run is closed (`orphan_running`), stale writes, the outbox (duplicates, effects of a
  failed execution, messages pending or dead). Not Temporal's agreement (`missing_row`,
  `outcome_mismatch`): the audit finds a job's runs by `TemporalScheduledById`, which a
  direct start has not (the bench awaits each run's result, which raises if one failed).
  The run's input is left as it was, without the `end_at` (the cost case counts its bytes).
- the **backfill** job: `* * * * *` in UTC from the first backfilled minute to the last
  (`start_at`, `end_at`), `paused`; the bench compiles its schedule from this very entry.
  Deleted once its runs closed, as before: a deleted schedule is judged from its first
  recorded slot to its last, every minute between needing its row (`lost`, `unexpected`),
  and every run Temporal lists for it against its row (`missing_row`, `outcome_mismatch`:
  the first and last minute's too). Kept, it would be judged from its `timing_since`, when
  it was created, after every backfilled minute: nothing would be due.
- the **latency** job: every 5 seconds from `start_at` to `end_at`, the case's window
  (the raw and seed schedules get the same bounds); compiled from its entry and kept
  until the audit has run: every fire time of the window is due (`lost`, `late`, ...), as
  for a catalog job in production.

`audit_ours` writes the catalog and runs the command as an operator does, a subprocess with
the fleet's settings in its environment, `--settle 0s` (every run has closed), and reads
its JSON Lines: the findings and the summary.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from catalog_file import utc, write_catalog  # bench/ is on sys.path (bench/fleet.py)

from schedules.catalog.files import read_catalog
from schedules.catalog.model import JobSpec

ROOT = Path(__file__).resolve().parent.parent
# The audit's rate on Temporal's visibility: the dev server is the fleet's own, and each job
# is a listing call at least (a direct start's job too): at the default 20 a second, the
# default run's 2,106 jobs took 109 s; at this rate 24 s.
PAGES_PER_SECOND = 1000
# Findings quoted in the results section when the audit is not clean (all are printed).
QUOTED = 20


class OursCatalog:
    """The catalog of every job ours runs in the fleet (see the module)."""

    def __init__(self, job: str) -> None:
        table = dict(read_catalog()[job])  # as jobs.toml writes it: durations as text
        table.pop("depends_on", None)  # its upstream is not run here (`fleet.bench_job`)
        self.base = table
        self.started = datetime.now(UTC).replace(microsecond=0)  # before any run of ours
        self.timed: dict[str, dict[str, Any]] = {}  # schedule-driven jobs' tables
        self.direct: list[str] = []  # jobs started directly, a run each

    def __len__(self) -> int:
        return len(self.timed) + len(self.direct)

    def started_directly(self, job_ids: Iterable[str]) -> None:
        """Note jobs about to be started directly (before a measured window: no CPU in it)."""
        self.direct.extend(job_ids)

    def scheduled(self, job_id: str, **timing: Any) -> JobSpec:
        """The entry of a schedule-driven job: nightly-reconcile's table with `timing`'s
        fields (None: left out); its `JobSpec`, to compile the job's schedule from."""
        table = {k: v for k, v in (self.base | timing).items() if v is not None}
        self.timed[job_id] = table
        return JobSpec.model_validate({**table, "id": job_id})

    def window_start(self) -> datetime:
        """The audit's `--from`: the earliest slot of any job (a backfill's are past ones)."""
        starts = [t["start_at"] for t in self.timed.values() if "start_at" in t]
        return min([self.started, *starts])

    def write(self, path: Path) -> None:
        # A direct start's entry: no fire time from a second before the audited window on.
        untimed = self.base | {"end_at": self.window_start() - timedelta(seconds=1)}
        write_catalog(path, {job_id: untimed for job_id in self.direct} | self.timed)


@dataclass
class AuditResult:
    """What `schedules audit` said of ours' side."""

    command: str
    exit_code: int
    seconds: float
    findings: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def clean(self) -> bool:
        """Exit 0 and no finding at all: an `inconclusive` one (exit 0) is no pass either."""
        return self.exit_code == 0 and not self.findings and not self.error

    def by_kind(self) -> str:
        kinds = Counter(f["kind"] for f in self.findings)
        return ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))

    def headline(self) -> str:
        """One line: the command, what it judged, its verdict and how long it took."""
        s = self.summary
        judged = (
            f"{s.get('jobs', '?')} jobs, {s.get('fire_times', '?')} fire times due, "
            f"{s.get('rows', '?')} rows read, {s.get('runs', '?')} runs listed"
        )
        if self.clean:
            verdict = "0 findings: **clean**"
        elif self.error:
            verdict = f"**could not judge** (exit {self.exit_code}): {self.error}"
        else:
            verdict = (
                f"**NOT clean**, exit {self.exit_code}: {len(self.findings)} finding(s) "
                f"({self.by_kind()})"
            )
        return f"`{self.command}`: {judged}; {verdict} (took {self.seconds:.1f} s)"

    def finding_lines(self, limit: int | None = None) -> list[str]:
        shown = self.findings if limit is None else self.findings[:limit]
        lines = [
            f"{f['kind']} {f['job']} {f['slot']['utc']}: {f['detail']} {f['witnesses']}"
            for f in shown
        ]
        if len(shown) < len(self.findings):
            lines.append(f"... and {len(self.findings) - len(shown)} more")
        return lines


def audit_ours(catalog: OursCatalog, workdir: Path, env: dict[str, str]) -> AuditResult:
    """Write ours' catalog into `workdir` and run `python -m schedules audit` on it over
    every slot of ours, with `env` (TEMPORAL_*, DATABASE_URL of ours' side)."""
    path = workdir / "ours.toml"
    catalog.write(path)
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    args = ["--from", utc(catalog.window_start()), "--to", utc(end), "--settle", "0s"]
    args += ["--pages-per-second", str(PAGES_PER_SECOND), "--json"]
    shown = f"python -m schedules audit --catalog <workdir>/ours.toml {' '.join(args)}"
    print(f"auditing ours' side, {len(catalog)} jobs: {shown}", file=sys.stderr)
    argv = [sys.executable, "-m", "schedules", "audit", "--catalog", str(path), *args]
    began = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    result = AuditResult(shown, done.returncode, time.monotonic() - began)
    if done.returncode not in (0, 1):  # 2: it could not read; anything else: it broke
        result.error = (done.stderr.strip() or done.stdout.strip())[-500:]
        return result
    for line in done.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            result.error = f"a line that is not JSON: {line[:200]}"
            continue
        if "summary" in record:
            result.summary = record["summary"]
        else:
            result.findings.append(record)
    return result
