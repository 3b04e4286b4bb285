"""One short trial of each fault class of `bench/chaos.py`, judged by the audit (issue 18:
the suite is not in the default run, one trial per class is)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_one_trial_per_fault_class_gives_no_finding_and_no_wrong_effect():
    done = subprocess.run(
        [sys.executable, "bench/chaos.py", "--trials", "1", "--invoices", "2000", "--no-output"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| sig")]
    assert len(rows) == 2, done.stdout
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        _fault, trials, slots, findings, wrong, taken_over = cells[:6]
        # The fault hit the holder: another attempt took the slot over, and judged clean.
        assert (trials, slots, findings, wrong, taken_over) == ("1", "1", "0", "0", "1"), row
