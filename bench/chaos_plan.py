"""A chaos run's plan: every choice of every trial drawn from one seed.

`plan(seed, faults, trials)` is pure: one `random.Random(seed)` draws, in order, the order
in which the fault classes' trials run, and for each trial where its fault lands (how many
chunks the gated run does first) and the delays around it. The same seed, classes and
trial count give the same plan, so a trial is replayed by running its number again
(`replay_command`), and its fault lands at the same point.

The clock classes' offsets (how far `dispatch-skew` puts the dispatcher's clock, how far
`clock-step` steps its worker's clock forward and then back) come from a second generator
of the same seed, drawn once per trial of every class: the plans of the seeds recorded
before these classes existed are unchanged.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# How many chunks a gated run does before its fault lands: the suite's tested range.
CHUNKS = (1, 3)
# Seconds the fault waits once the run is held at its landing point, and between rolling
# restarts.
DELAY = (0.0, 0.5)
PAUSE = (0.0, 0.5)
# Minutes: the dispatcher's clock skew (either way), and the steps of a stepped clock.
SKEW = (-5, 5)
STEP = (1, 10)


@dataclass(frozen=True)
class TrialPlan:
    """One trial: its number in the plan (1-based), its fault class and where it lands."""

    number: int
    fault: str
    chunks: int  # chunks the held run does before the fault (classes with a chunk gate)
    delay: float  # seconds the fault waits at its landing point
    pause: float  # seconds between rolling restarts (rolling)
    skew: int = 0  # minutes the dispatcher's clock is off (dispatch-skew)
    # Minutes the worker's clock is stepped forward, then back behind the true time
    # (clock-step).
    step: tuple[int, int] = (0, 0)

    def describe(self) -> str:
        clock = {
            "dispatch-skew": f", clock {self.skew:+d}m",
            "clock-step": f", clock stepped +{self.step[0]}m then -{self.step[1]}m",
        }.get(self.fault, "")
        return (
            f"#{self.number} {self.fault}: after {self.chunks} chunk(s), "
            f"delay {self.delay:.3f}s, pause {self.pause:.3f}s{clock}"
        )


def plan(seed: int, faults: list[str], trials: int) -> list[TrialPlan]:
    """`trials` trials of each class of `faults`, in an order and with landing points
    drawn from `seed`."""
    draw = random.Random(seed)
    clock = random.Random(f"clock-{seed}")
    order = [fault for fault in faults for _ in range(trials)]
    draw.shuffle(order)
    return [
        TrialPlan(
            number=n,
            fault=fault,
            chunks=draw.randint(*CHUNKS),
            delay=round(draw.uniform(*DELAY), 3),
            pause=round(draw.uniform(*PAUSE), 3),
            skew=clock.choice(SKEW),
            step=(clock.randint(*STEP), clock.randint(*STEP)),
        )
        for n, fault in enumerate(order, start=1)
    ]


def shown(seed: int, faults: list[str], trials: int, only: int | None = None) -> list[str]:
    """What a run prints first: the seed, then each trial it runs (all, or `only`)."""
    lines = [f"seed {seed}: {len(faults)} class(es) x {trials} trial(s)"]
    trials_run = [t for t in plan(seed, faults, trials) if only in (None, t.number)]
    return lines + [f"  {t.describe()}" for t in trials_run]


def replay_command(seed: int, faults: list[str], trials: int, number: int) -> str:
    """The one command that runs trial `number` of this plan again, as planned."""
    return (
        f".venv/bin/python bench/chaos.py --seed {seed} --faults {','.join(faults)} "
        f"--trials {trials} --only {number}"
    )
