"""`--wait-for-cluster 5` waits 5 s: the retry policy's budget is a bound (issue 43, item 4).

Before, the policy slept its full backoff (0.25 s doubling to 5 s) even past the deadline
and then tried once more, and a connection attempt got at least 0.5 s however little was
left: `--wait-for-cluster 5` at a refused address took 8.7 s. The clock here is the test's,
so the property is checked exactly, not against wall-clock margins.
"""

from __future__ import annotations

import pytest

from core.errors import TemporalUnreachableError
from schedules.server.retry import Retry


class FakeTime:
    """A clock that only moves when an attempt or a sleep spends time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.attempts: list[tuple[float, float]] = []  # (start, timeout)
        self.sleeps: list[tuple[float, float]] = []  # (start, seconds)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append((self.now, seconds))
        self.now += seconds


def refused(fake: FakeTime, spends: float | None):
    """An attempt at an address that refuses (after `spends` s) or never answers (None:
    the attempt uses its whole timeout, as `asyncio.wait_for` would)."""

    async def attempt(timeout: float) -> None:
        fake.attempts.append((fake.now, timeout))
        fake.now += timeout if spends is None else min(spends, timeout)
        raise RuntimeError("failed client connect: Connection refused (os error 111)")

    return attempt


@pytest.mark.parametrize("spends", [None, 0.0, 0.01, 0.3, 1.7])
@pytest.mark.parametrize("seconds", [0.1, 1.0, 5.0, 8.7, 30.0])
async def test_no_attempt_or_wait_ends_past_the_deadline(seconds, spends):
    fake = FakeTime()
    retry = Retry(seconds, waiting_for_cluster=True, clock=fake.clock, sleep=fake.sleep)
    deadline = fake.now + seconds
    with pytest.raises(TemporalUnreachableError, match=f"within {seconds:g}s"):
        await retry.within(refused(fake, spends), attempt_cap=10.0)
    assert fake.attempts, "at least one attempt"
    for start, timeout in fake.attempts:
        assert start < deadline and 0 < timeout <= 10.0 and start + timeout <= deadline
    for start, pause in fake.sleeps:
        assert pause > 0 and start + pause <= deadline
    assert fake.now <= deadline


async def test_the_budget_is_spent_retrying_not_cut_short():
    """A bound, and not a smaller one: the last wait ends at the deadline, and an attempt
    that never answers gets all that is left."""
    fake = FakeTime()
    retry = Retry(5.0, waiting_for_cluster=True, clock=fake.clock, sleep=fake.sleep)
    with pytest.raises(TemporalUnreachableError):
        await retry.within(refused(fake, 0.01))
    assert fake.now == pytest.approx(1005.0)
    assert len(fake.attempts) >= 5

    fake = FakeTime()
    retry = Retry(5.0, waiting_for_cluster=True, clock=fake.clock, sleep=fake.sleep)
    with pytest.raises(TemporalUnreachableError):
        await retry.within(refused(fake, None))
    assert fake.attempts == [(1000.0, 5.0)]


async def test_a_refused_connection_is_final_at_once_when_not_waiting():
    fake = FakeTime()
    retry = Retry(5.0, clock=fake.clock, sleep=fake.sleep)
    with pytest.raises(TemporalUnreachableError, match="Connection refused"):
        await retry.within(refused(fake, 0.01))
    assert len(fake.attempts) == 1 and not fake.sleeps


async def test_a_budget_of_zero_is_one_attempt():
    fake = FakeTime()
    retry = Retry(0.0, waiting_for_cluster=True, clock=fake.clock, sleep=fake.sleep)
    with pytest.raises(TemporalUnreachableError):
        await retry.within(refused(fake, 0.01))
    assert len(fake.attempts) == 1 and fake.attempts[0][1] > 0 and not fake.sleeps
