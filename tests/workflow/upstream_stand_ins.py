"""Stand-ins for the activities of a slot's wait for its upstreams (`check_upstream`,
`await_upstream`, `cancel_wait`), answering what the test scripted, keeping every call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.common.dependency_models import (
    NOT_READY,
    UpstreamProgress,
    WaitInput,
    WaitResult,
    WaitState,
)
from activities.dependencies.upstream import CancelInput

LATER = datetime(2100, 1, 1, tzinfo=UTC)


def answer(state: WaitState, progress: str = "", reason: str | None = None) -> WaitResult:
    """A check's answer for a job of one dependency (its upstream outstanding unless ready)."""
    up = UpstreamProgress(upstream="up", mapped=2, done=2 if state == "ready" else 1)
    if state != "ready":
        pending = datetime(2026, 11, 30, 2, tzinfo=UTC)
        up = up.model_copy(update={"pending": 1, "pending_first": pending, "pending_last": pending})
    return WaitResult(state=state, deadline=LATER, progress=progress, reason=reason, upstreams=[up])


@dataclass
class UpstreamStandIns:
    """`checks`: what each `check_upstream` answers, in order (the last one repeats);
    `poll`: what `await_upstream` answers (None: "not ready", for ever)."""

    checks: list[WaitResult]
    poll: WaitResult | None = None
    calls: list[tuple[str, Any]] = field(default_factory=list)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)  # a check said "waiting"

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def activities(self) -> list[Callable[..., Any]]:
        return [self.check_upstream, self.await_upstream, self.cancel_wait]

    @activity.defn(name="check_upstream")
    async def check_upstream(self, wait: WaitInput) -> WaitResult:
        n = len([c for c in self.calls if c[0] == "check_upstream"])
        self.calls.append(("check_upstream", wait))
        result = self.checks[min(n, len(self.checks) - 1)]
        if result.state == "waiting":
            self.waiting.set()
        return result

    @activity.defn(name="await_upstream")
    async def await_upstream(self, wait: WaitInput) -> WaitResult:
        self.calls.append(("await_upstream", wait))
        if self.poll is None:
            raise ApplicationError(
                "not ready", type=NOT_READY, category=ApplicationErrorCategory.BENIGN
            )
        return self.poll

    @activity.defn(name="cancel_wait")
    async def cancel_wait(self, cancel: CancelInput) -> None:
        self.calls.append(("cancel_wait", cancel))
