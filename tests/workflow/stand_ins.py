"""Stand-in activities for the workflow tier, registered under the real activity names.

The engine's activities (`begin_run`, `claim_execution`, `record_failure`,
`attempt_took_over`, `finish_steps`, `settle_steps`) and a work activity answer what the
test scripted, with no database, and keep every call they got, so a test says what the
workflow asked for and in which order. The run's notes (`backfill_skips`,
`outcome_attribute`: asked of the server at a run's end) keep theirs apart, in `notes`.
One `StandIns` per test.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.catchup.backfills import BackfillSkips, SkipsInput
from activities.catchup.missed import PlanResult
from activities.common.models import (
    AttemptQuery,
    ClaimInput,
    ClaimResult,
    FailureInput,
    WorkInput,
    WorkResult,
)
from activities.run.begin import BeginInput, BeginResult, BegunWork, WorkOrBegin
from activities.steps.record import FinishInput, SettleInput, StepInput, StepResult

WORK = "send_invoice_reminders"  # a real kind's work activity; its stand-in is `work`


@dataclass
class StandIns:
    """What the stand-ins answer (the plan, settled slots, how work and steps go), and
    the calls they got: `(activity name, input)` in the order they came."""

    plan: PlanResult | None = None  # begin_run's plan; None: the run's own slot only
    settled: dict[datetime, tuple[str, str]] = field(default_factory=dict)  # outcome, reason
    work_does: Callable[[WorkInput], WorkResult] | None = None  # may raise
    hang_first_series: bool = False  # the first work attempt never returns
    took_over: bool = False  # attempt_took_over's answer
    declines: bool = False  # work given the run's begin declines it (another run's slot)
    # Work given the run's begin does a first chunk and leaves more (a chunked kind's).
    more: bool = False
    fail_step: str | None = None  # a step that fails for good
    hang_step: str | None = None  # a step that runs until cancelled
    skips: BackfillSkips | None = None  # backfill_skips' answer
    skips_fail: bool = False  # backfill_skips cannot reach the server
    outcome_registered: bool = True  # outcome_attribute's answer
    calls: list[tuple[str, Any]] = field(default_factory=list)
    work_local: list[bool] = field(default_factory=list)  # each work call: a local activity?
    notes: list[tuple[str, Any]] = field(default_factory=list)  # the run notes' calls
    started: asyncio.Event = field(default_factory=asyncio.Event)  # hang_step has begun
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def of(self, name: str) -> list[Any]:
        """The inputs of every call of activity `name`."""
        return [arg for called, arg in self.calls if called == name]

    def names(self) -> list[str]:
        return [called for called, _ in self.calls]

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.begin_run,
            self.claim_execution,
            self.record_failure,
            self.attempt_took_over,
            self.work,
            self.finish_steps,
            self.settle_steps,
            self.open_batch,
            self.close_batch,
            self.process,
            self.publish,
            self.backfill_skips,
            self.outcome_attribute,
        ]

    def _claim(self, claim: ClaimInput) -> ClaimResult:
        outcome, reason = self.settled.get(claim.scheduled_at, ("claimed", None))
        return ClaimResult(execution_id=next(self._ids), outcome=outcome, reason=reason)

    @activity.defn(name="begin_run")
    async def begin_run(self, begin: BeginInput) -> BeginResult:
        self.calls.append(("begin_run", begin))
        return self._begin(begin)

    def _begin(self, begin: BeginInput) -> BeginResult:
        own = begin.claim.scheduled_at
        plan = self.plan or PlanResult(run=[own], origin=begin.claim.origin or "scheduled")
        if not plan.run:
            return BeginResult(plan=plan)
        origin = plan.origin if plan.run[0] == own else "catch-up"
        first = begin.claim.model_copy(update={"scheduled_at": plan.run[0], "origin": origin})
        self.calls.append(("claim", first))
        return BeginResult(plan=plan, claim=self._claim(first))

    @activity.defn(name="claim_execution")
    async def claim_execution(self, claim: ClaimInput) -> ClaimResult:
        self.calls.append(("claim_execution", claim))
        self.calls.append(("claim", claim))
        return self._claim(claim)

    @activity.defn(name="record_failure")
    async def record_failure(self, failure: FailureInput) -> None:
        self.calls.append(("record_failure", failure))

    @activity.defn(name="attempt_took_over")
    async def attempt_took_over(self, query: AttemptQuery) -> bool:
        self.calls.append(("attempt_took_over", query))
        return self.took_over

    @activity.defn(name=WORK)
    async def work(self, work: WorkOrBegin) -> WorkResult:
        """The slot's work; given the run's begin (a one-transaction kind), the begin too,
        as `begin_and_work` does: `("begin_in_work", begin)` then the claim it makes."""
        self.calls.append((WORK, activity.info().activity_id))
        self.work_local.append(activity.info().is_local)
        if self.hang_first_series and len(self.of(WORK)) == 1:
            await asyncio.Event().wait()  # a frozen worker: the server times it out
        if work.begin is None:
            return self._work(work)
        self.calls.append(("begin_in_work", work.begin))
        if self.declines:
            return BegunWork(declined="another workflow run holds the slot")
        begun = self._begin(work.begin)
        if begun.claim is None or begun.claim.outcome != "claimed":
            return BegunWork(plan=begun.plan, claim=begun.claim)
        if self.more:
            return BegunWork(plan=begun.plan, claim=begun.claim, counts={"sent": 1}, more=True)
        done = self._work(work)
        return BegunWork(plan=begun.plan, claim=begun.claim, **done.model_dump())

    def _work(self, work: WorkInput) -> WorkResult:
        if self.work_does is not None:
            return self.work_does(work)
        return WorkResult(counts={"sent": 3})

    @activity.defn(name="backfill_skips")
    async def backfill_skips(self, ask: SkipsInput) -> BackfillSkips | None:
        self.notes.append(("backfill_skips", ask))
        if self.skips_fail:
            raise ApplicationError("server unreachable", non_retryable=True)
        return self.skips

    @activity.defn(name="outcome_attribute")
    async def outcome_attribute(self) -> bool:
        self.notes.append(("outcome_attribute", None))
        return self.outcome_registered

    @activity.defn(name="finish_steps")
    async def finish_steps(self, finish: FinishInput) -> WorkResult:
        self.calls.append(("finish_steps", finish))
        return WorkResult(counts=finish.counts)

    @activity.defn(name="settle_steps")
    async def settle_steps(self, settle: SettleInput) -> None:
        self.calls.append(("settle_steps", settle))

    async def _step(self, step: StepInput, result: StepResult) -> StepResult:
        self.calls.append((step.step, step))
        if step.step == self.hang_step:
            self.started.set()
            while True:  # until the run is cancelled: heartbeats carry the cancellation
                activity.heartbeat()
                await asyncio.sleep(0.05)
        if step.step == self.fail_step:
            raise ApplicationError(f"{step.step} refused", non_retryable=True)
        return result

    @activity.defn(name="open_batch")
    async def open_batch(self, step: StepInput) -> StepResult:
        return await self._step(step, StepResult(output={"batch": 7}, counts={"opened": 1}))

    @activity.defn(name="close_batch")
    async def close_batch(self, step: StepInput) -> StepResult:
        return await self._step(step, StepResult())

    @activity.defn(name="process")
    async def process(self, step: StepInput) -> StepResult:
        # Two calls: a batch of 5 of 10, then the rest.
        done = len(self.of("process")) >= 1
        items = 10 if done else 5
        result = StepResult(done=done, counts={"items": items}, items_done=items, items_total=10)
        return await self._step(step, result)

    @activity.defn(name="publish")
    async def publish(self, step: StepInput) -> StepResult:
        return await self._step(step, StepResult(counts={"published": 1}))
