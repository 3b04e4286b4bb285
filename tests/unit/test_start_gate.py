"""The dispatcher's start gate (`activities.runtime.start_gate`, issue 40 item 6): a process's
workflow starts taken fairly across keys (tenants, batch runs), at most `per_key` of one
key and `limit` in all, so one tenant's hundred runs cannot make another's start wait
behind them."""

from __future__ import annotations

import asyncio

from activities.runtime.start_gate import StartGate


async def holders(
    gate: StartGate, wanted: list[str]
) -> tuple[list[str], list[asyncio.Event], list[asyncio.Task]]:
    """Ask the gate for a place for each key of `wanted`, in order; each holder keeps its
    place until its event is set. The order in which the places were given is returned."""
    given: list[str] = []
    done = [asyncio.Event() for _ in wanted]

    async def hold(key: str, release: asyncio.Event) -> None:
        async with gate.place(key):
            given.append(key)
            await release.wait()

    tasks = [asyncio.ensure_future(hold(k, e)) for k, e in zip(wanted, done, strict=True)]
    await asyncio.sleep(0)  # every task has asked (an event-loop turn, not a wait for time)
    return given, done, tasks


async def release_all(done: list[asyncio.Event], tasks: list[asyncio.Task]) -> None:
    for event in done:
        event.set()
    await asyncio.gather(*tasks)


async def test_a_key_holds_at_most_its_share_and_another_key_goes_first():
    gate = StartGate(limit=4, per_key=2)
    given, done, tasks = await holders(gate, ["big"] * 6 + ["batch-1", "batch-2"])
    assert given == ["big", "big", "batch-1", "batch-2"]
    assert (gate.holding, gate.held) == (4, {"big": 2, "batch-1": 1, "batch-2": 1})
    await release_all(done, tasks)
    assert given[4:] == ["big"] * 4
    assert (gate.holding, gate.held, gate.waiting, gate.served) == (0, {}, {}, {})


async def test_free_places_go_to_the_waiting_keys_in_turn():
    gate = StartGate(limit=1, per_key=1)
    given, done, tasks = await holders(gate, ["a", "a", "a", "b", "c", "c"])
    assert given == ["a"]
    await release_all(done, tasks)  # one place: each holder's exit gives it to the next
    assert given == ["a", "b", "c", "a", "c", "a"]


async def test_a_waiter_cancelled_gives_its_turn_away():
    gate = StartGate(limit=1)
    given, done, tasks = await holders(gate, ["a"])

    async def enter(key: str) -> None:
        async with gate.place(key):
            given.append(key)

    cancelled = asyncio.ensure_future(enter("b"))
    after = asyncio.ensure_future(enter("c"))
    await asyncio.sleep(0)
    assert list(gate.waiting) == ["b", "c"]
    cancelled.cancel()
    await asyncio.sleep(0)
    assert cancelled.cancelled() and list(gate.waiting) == ["c"]
    done[0].set()
    await asyncio.gather(tasks[0], after)
    assert given == ["a", "c"]
    assert (gate.holding, gate.held, gate.waiting, gate.served) == (0, {}, {}, {})
