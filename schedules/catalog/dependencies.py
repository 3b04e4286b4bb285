"""`depends_on` in the catalog (and in runtime schedules): its fields, and the checks that
need more than one job (docs/dependencies.md).

```toml
[nightly-reconcile]
depends_on = [{ job = "hourly-sync", slots = "window", within = "2h", on_failure = "wait" }]
```

Each entry is refused, with a line naming the job, the field and the value, for an
unknown upstream, the job itself, an upstream named twice, a cycle, a `within` that is not
a duration from 1s to 31d, an unknown `slots` or `on_failure`, and a `same` whose fire
times do not line up with the upstream's (it would never match: use `latest` or `window`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from activities.common.dependency_models import Dependency, OnFailure, SlotMapping
from activities.common.lifetime import LONGEST_WITHIN
from schedules.catalog.durations import Duration, format_duration
from timing import Timing, zone
from timing.zones import changes

# The longest a slot may wait for its upstreams before its policy applies: the catch-up
# horizon (a slot older than that is never run late either).
_TICK = timedelta(microseconds=1)
_SAME_SAMPLE = 200  # our next fire times checked against the upstream's, besides DST days
_SAME_HORIZON = timedelta(days=400)


class DependencySpec(BaseModel):
    """One `depends_on` entry of a catalog job: a catalog job upstream of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: str
    slots: SlotMapping
    within: Duration
    on_failure: OnFailure = "wait"

    @field_validator("within")
    @classmethod
    def _within(cls, value: timedelta) -> timedelta:
        return checked_within(value)

    def dependency(self) -> Dependency:
        """The engine's value, carried in the run input (the same fields)."""
        return Dependency.model_validate(self.model_dump())


class RuntimeDependency(DependencySpec):
    """One `depends_on` entry of a runtime schedule: a catalog job (`job`) or another
    runtime schedule of the same tenant, by name (`schedule`)."""

    job: str | None = None  # type: ignore[assignment]
    schedule: str | None = None

    @model_validator(mode="after")
    def _one_upstream(self) -> RuntimeDependency:
        if (self.job is None) == (self.schedule is None):
            raise ValueError(
                "give exactly one of job (a catalog job) and schedule (one of the tenant's)"
            )
        return self

    @property
    def upstream(self) -> str:
        return self.job if self.job is not None else f"schedule {self.schedule!r}"


def checked_within(value: timedelta) -> timedelta:
    """`within` from 1s to `LONGEST_WITHIN` (a wait needs a deadline, and a finite one)."""
    if not timedelta(seconds=1) <= value <= LONGEST_WITHIN:
        raise ValueError(
            f"must be from 1s to {format_duration(LONGEST_WITHIN)} (a wait needs a deadline)"
        )
    return value


def own_problems(job_id: str, upstreams: Iterable[str]) -> list[str]:
    """A job's own `depends_on` problems: itself upstream, an upstream named twice."""
    problems, seen = [], set()
    for i, upstream in enumerate(upstreams):
        if upstream == job_id:
            problems.append(f"depends_on[{i}].job: a job cannot depend on itself ({upstream!r})")
        elif upstream in seen:
            problems.append(f"depends_on[{i}].job: {upstream!r} is named twice")
        seen.add(upstream)
    return problems


def cycles(edges: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Each job on a cycle of `edges` (job -> its upstreams), with one such cycle."""
    found: dict[str, list[str]] = {}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for up in edges.get(node, ()):
            if state.get(up) == 1:
                loop = [*path[path.index(up) :], up]
                for member in loop[:-1]:
                    found.setdefault(member, loop)
            elif state.get(up) is None and up in edges:
                visit(up)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if state.get(node) is None:
            visit(node)
    return found


def cycle_problem(job_id: str, loop: list[str]) -> str:
    shown = " -> ".join(loop[loop.index(job_id) :] + loop[1 : loop.index(job_id) + 1])
    return f"depends_on: a cycle: {shown}; a job cannot wait, through others, for itself"


def same_mismatch(ours: Timing, upstream: Timing, now: datetime) -> datetime | None:
    """One of our fire times (over the next 400 days from `now`) that is not one of the
    upstream's, or None: `same` needs each of ours to be one of its. Checked on our next
    fire times and on every day either side of an offset change of either zone."""
    end = now + _SAME_HORIZON
    windows = []
    sample = ours.fire_times(now, end, limit=_SAME_SAMPLE)
    if sample:
        windows.append((sample[0], sample[-1] + _TICK))
    for zone_name in {ours.timezone, upstream.timezone}:
        for change in changes(zone_name, now, end):
            windows.append((change.at - timedelta(days=1), change.at + timedelta(days=1)))
    for start, stop in windows:
        theirs = set(upstream.fire_times(start, stop))
        for fire in ours.fire_times(start, stop):
            if fire not in theirs:
                return fire
    return None


def same_problem(index: int, upstream_id: str, fire: datetime, ours: Timing) -> str:
    local = fire.astimezone(zone(ours.timezone)).strftime("%Y-%m-%d %H:%M %Z")
    return (
        f"depends_on[{index}].slots: 'same' needs each fire time of this job to be one of "
        f"{upstream_id}'s, and {local} ({fire.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}) is not; "
        "use 'latest' (its last slot before ours) or 'window' (all of its slots since our "
        "previous one)"
    )


def dependency_problems(
    jobs: Sequence[Any], declared: set[str], now: datetime | None = None
) -> dict[str, list[str]]:
    """The problems of `depends_on` across jobs: an upstream the catalog does not declare,
    a cycle, a `same` mapping whose fire times never line up (an upstream declared but
    itself invalid has its own problems, and is not judged here)."""
    by_id = {job.id: job for job in jobs}
    found: dict[str, list[str]] = {}
    now = now or datetime.now(UTC)
    for job in jobs:
        for i, dep in enumerate(job.depends_on):
            upstream = by_id.get(dep.job)
            if dep.job not in declared:
                known = ", ".join(sorted(declared - {job.id})) or "none"
                found.setdefault(job.id, []).append(
                    f"job {job.id!r}: depends_on[{i}].job: no job {dep.job!r} in the catalog "
                    f"(jobs: {known[:200]})"
                )
            elif upstream is not None and dep.slots == "same" and dep.job != job.id:
                fire = same_mismatch(job.timing, upstream.timing, now)
                if fire is not None:
                    problem = same_problem(i, dep.job, fire, job.timing)
                    found.setdefault(job.id, []).append(f"job {job.id!r}: {problem}")
    edges = {job.id: [d.job for d in job.depends_on if d.job != job.id] for job in jobs}
    for job_id, loop in cycles(edges).items():
        found.setdefault(job_id, []).append(f"job {job_id!r}: {cycle_problem(job_id, loop)}")
    return found
