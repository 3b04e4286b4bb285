"""An error about a server the operator CLI could not reach names the setting it came from,
and says when that setting was not set and the local stack's default was tried (issue 20:
a newcomer outside `make run`). The worker itself refuses to start without them
(tests/integration/test_bad_input.py)."""

from __future__ import annotations

import pytest

from core.errors import TemporalUnreachableError, setting_hint
from schedules.cli.context import Context
from schedules.record import database_hint
from worker.__main__ import main as worker_main

REFUSED = RuntimeError(
    "Failed client connect: tcp connect error, Os { code: 111, kind: ConnectionRefused, "
    'message: "Connection refused" }'
)


def test_a_set_variable_is_named_and_an_unset_one_said_to_be_unset():
    assert setting_hint("TEMPORAL_ADDRESS", {"TEMPORAL_ADDRESS": "t:7233"}) == "(TEMPORAL_ADDRESS)"
    assert setting_hint("DATABASE_URL", {"DATABASE_URL": "  "}) == (
        "(DATABASE_URL is not set, so the local stack's default was tried)"
    )


@pytest.mark.parametrize("value", [None, "127.0.0.1:1"])
async def test_the_cli_says_whether_temporal_address_was_set(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("TEMPORAL_ADDRESS", value)

    async def refused():
        raise REFUSED

    with pytest.raises(TemporalUnreachableError) as raised:
        await Context().retrying(refused)
    unset = "(TEMPORAL_ADDRESS is not set, so the local stack's default was tried)"
    expected = unset if value is None else "(TEMPORAL_ADDRESS)"
    address = value or "localhost:7233"
    assert str(raised.value) == f"cannot reach Temporal at {address}: Connection refused {expected}"


def test_the_database_hint_follows_the_environment(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert "DATABASE_URL is not set" in database_hint()
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@db/jobs")
    assert database_hint() == "(DATABASE_URL)"


def test_worker_outbox_names_the_database_it_could_not_reach(monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@127.0.0.1:1/jobs")
    assert worker_main(["outbox"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: cannot reach the database at 127.0.0.1:1: "), line
    assert line.endswith("(DATABASE_URL)"), line
