"""Progress bars on a terminal only (schedules/progress.py)."""

from __future__ import annotations

import io

from schedules.progress import QUIET, Bars, for_stream


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_piped_output_gets_no_bar():
    assert for_stream(io.StringIO()) is QUIET


def test_a_terminal_gets_a_bar_per_phase_that_counts_the_items():
    screen = Terminal()
    assert isinstance(for_stream(screen), Bars)
    bars = Bars(screen, redraw_seconds=0)  # every step drawn, whatever the clock
    bars.phase("plan", 3)
    for _ in range(3):
        bars.advance()
    bars.close()
    drawn = screen.getvalue()
    assert "plan" in drawn and "3/3" in drawn, drawn


def test_quiet_lines_go_to_stdout_as_printed(capsys):
    QUIET.phase("backfill", 2)
    QUIET.write("a run's line")
    QUIET.advance()
    QUIET.close()
    assert capsys.readouterr() == ("a run's line\n", "")


def test_a_phase_counts_in_its_own_unit():
    screen = Terminal()
    bars = Bars(screen, redraw_seconds=0)
    bars.phase("check", 2, unit="line")
    bars.advance(2)
    bars.close()
    assert "2/2" in screen.getvalue() and "line" in screen.getvalue(), screen.getvalue()
