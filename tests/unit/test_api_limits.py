"""The API's per-key token bucket (api/limits.py) on a clock the test moves, and the key's
shape (api/keys.py)."""

from __future__ import annotations

from api.keys import parse
from api.limits import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_key_gets_its_burst_then_waits_for_the_rate():
    clock = Clock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.wait_seconds(1) for _ in range(3)] == [0, 0, 0]
    assert limiter.wait_seconds(1) == 1  # half a second to the next token: Retry-After 1
    assert limiter.wait_seconds(2) == 0  # another key has its own bucket
    clock.now += 0.5
    assert limiter.wait_seconds(1) == 0
    clock.now += 60  # refilled to the burst, no more
    assert [limiter.wait_seconds(1) for _ in range(4)] == [0, 0, 0, 1]


def test_a_slow_rate_asks_for_the_whole_wait():
    limiter = RateLimiter(rate=0.1, burst=1, clock=Clock())
    assert (limiter.wait_seconds(7), limiter.wait_seconds(7)) == (0, 10)


def test_a_key_is_prefix_id_secret():
    assert parse("sjk_12_abc_def-") == (12, "abc_def-")
    for bad in (
        "",
        "sjk",
        "sjk_",
        "sjk_x_abc",
        "sjk_12_",
        "xyz_12_abc",
        "sjk_-1_abc",
        "sjk_" + "9" * 19 + "_a",
    ):
        assert parse(bad) is None, bad
