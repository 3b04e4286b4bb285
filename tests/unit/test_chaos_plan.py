"""The chaos suite's plan is a pure function of its seed (issue 41, item 2): the same seed
gives the same trials in the same order, landing at the same points; another seed does not;
`--only N` is trial N of the same plan; `--plan-only` prints the plan and runs nothing."""

from __future__ import annotations

import subprocess
import sys

from bench.chaos_plan import CHUNKS, DELAY, PAUSE, SKEW, STEP, plan, replay_command, shown
from tests.helpers import ROOT

FAULTS = ["kill", "freeze", "pg-restart", "rolling"]


def test_the_same_seed_gives_the_same_plan_and_another_seed_another():
    assert plan(7, FAULTS, 5) == plan(7, FAULTS, 5)
    assert plan(7, FAULTS, 5) != plan(8, FAULTS, 5)
    # Every class as many times as asked, numbered in order, every draw in its range.
    trials = plan(7, FAULTS, 5)
    assert sorted(t.fault for t in trials) == sorted(FAULTS * 5)
    assert [t.number for t in trials] == list(range(1, 21))
    assert all(CHUNKS[0] <= t.chunks <= CHUNKS[1] for t in trials)
    assert all(DELAY[0] <= t.delay <= DELAY[1] and PAUSE[0] <= t.pause <= PAUSE[1] for t in trials)


def test_a_replay_runs_one_trial_of_the_same_plan_as_planned():
    everything = shown(42, FAULTS, 3)
    assert everything[0] == "seed 42: 4 class(es) x 3 trial(s)"
    assert everything[1:] == [f"  {t.describe()}" for t in plan(42, FAULTS, 3)]
    assert shown(42, FAULTS, 3, only=5) == [everything[0], everything[5]]
    assert replay_command(42, FAULTS, 3, 5) == (
        ".venv/bin/python bench/chaos.py --seed 42 --faults kill,freeze,pg-restart,rolling "
        "--trials 3 --only 5"
    )


def test_plan_only_prints_the_seed_and_its_plan_first_and_runs_nothing():
    done = subprocess.run(
        [sys.executable, "bench/chaos.py", "--seed", "42", "--trials", "3",
         "--faults", ",".join(FAULTS), "--plan-only", "--only", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines() == shown(42, FAULTS, 3, only=5)


def test_the_clock_draws_leave_a_recorded_seeds_plan_as_it_was():
    """The clock classes' offsets come from a generator of their own: the first trials of
    the soak's seed 4101, recorded before those classes existed, are drawn as then."""
    faults = ["kill", "freeze", "zombie", "absorb", "pg-terminate", "pg-restart"]
    faults.append("temporal-restart")
    assert shown(4101, faults, 10)[1:3] == [
        "  #1 absorb: after 3 chunk(s), delay 0.101s, pause 0.358s",
        "  #2 zombie: after 1 chunk(s), delay 0.104s, pause 0.346s",
    ]
    clocks = plan(7, ["clock-step", "dispatch-skew"], 10)
    assert {t.skew for t in clocks} == set(SKEW)
    assert all(STEP[0] <= m <= STEP[1] for t in clocks for m in t.step)
    step, skew = (next(t for t in clocks if t.fault == f) for f in ("clock-step", "dispatch-skew"))
    assert step.describe().endswith(f"clock stepped +{step.step[0]}m then -{step.step[1]}m")
    assert skew.describe().endswith(f"clock {skew.skew:+d}m")
