"""Bad input to runtime schedules is refused as bad input (issue 36, item 5): exit 2, one
line naming the line and the field, nothing written; never `unexpected ...` and exit 1.

What PostgreSQL's jsonb or the interpreter's JSON reader cannot take: NUL in a string,
an integer of 5,000 digits, JSON nested 100,000 deep, a number that is not finite, a byte
that is not UTF-8; and a `depends_on` problem of an import, named by its line too.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from core.errors import InvalidScheduleError
from schedules import tenants
from tests.integration.test_runtime_schedules_cli import cli, one_error_line, rows

NOW = datetime(2027, 3, 1, 12, tzinfo=UTC)
BASE = {"tenant": "acme", "kind": "test-noop", "cron": "0 8 * * 1", "timezone": "UTC"}
GOOD = json.dumps(BASE | {"name": "good"})
DIGITS = "9" * 5000


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def line(**fields) -> str:
    return json.dumps(BASE | {"name": "x"} | fields)


def raw(fields: str) -> str:
    """A line whose last fields are written as given (JSON `json.dumps` would not write)."""
    return line()[:-1] + ", " + fields + "}"


# (what, line 2 of the file, what its refusal says after "line 2: ")
IMPORTS = [
    ("NUL in params", line(params={"label": "a\x00b"}), "schedule 'acme'/'x': params.label: must hold no NUL"),
    ("NUL in a note", line(paused=True, note="a\x00b"), "schedule 'acme'/'x': note: must hold no NUL"),
    ("5,000 digits", raw(f'"params": {{"size": {DIGITS}}}'), "schedule 'acme'/'x': params.size: must be an integer within +-9223372036854775807, got one of 5000 digits"),
    ("5,000 digits", raw(f'"max_missed": {DIGITS}'), "schedule 'acme'/'x': max_missed: must be an integer within"),
    ("100,000 deep", raw(f'"params": {{"a": {deep(100_000)}}}'), "params: nested deeper than 32 levels"),
    ("40 deep", raw(f'"params": {{"a": {deep(40)}}}'), "schedule 'acme'/'x': params.a[0][0]"),
    ("not finite", raw('"params": {"size": 1e400}'), "schedule 'acme'/'x': params.size: must be a finite number, got inf"),
    ("NaN", raw('"params": {"size": NaN}'), "schedule 'acme'/'x': params.size: must be a finite number, got nan"),
    ("a lone surrogate", raw('"params": {"label": "\\ud800"}'), "schedule 'acme'/'x': params.label: must be Unicode text"),
    ("depends_on", line(depends_on=[{"schedule": "nope", "slots": "latest", "within": "1h"}]), "schedule 'acme'/'x': depends_on[0].schedule: the tenant has no live schedule named 'nope'"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "text", "says"), IMPORTS, ids=[c[0] for c in IMPORTS])
def test_an_import_line_is_refused_by_its_number_and_field(
    database_url, tmp_path, what, text, says
):
    path = tmp_path / "lines.jsonl"
    path.write_text(f"{GOOD}\n{text}\n")
    done = cli(database_url, "import", str(path))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert one_error_line(done).startswith(f"error: line 2: {says}"), done.stderr
    assert rows(database_url, "runtime_schedules") == 0


def test_a_line_that_is_not_utf8_is_refused_by_its_number(database_url, tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + line(name="caf\xe9").encode()[:-3] + b'\xff"}\n')
    done = cli(database_url, "import", str(path))
    assert done.returncode == 2
    line_no = len(line(name="caf\xe9").encode()) - 2
    assert one_error_line(done) == (
        f"error: line 2: not UTF-8 text: byte 0xff at column {line_no}; nothing was written"
    )
    assert rows(database_url, "runtime_schedules") == 0


CREATE = ("create", "--tenant", "acme", "--name", "x", "--kind", "test-noop", "--cron", "0 8 * * 1")


@pytest.mark.parametrize(
    ("params", "says"),
    [
        (
            '{"label": "a\\u0000"}',
            "argument --params: must be a JSON object: label: must hold no NUL",
        ),
        (f'{{"size": {DIGITS}}}', "argument --params: must be a JSON object: size: must be an"),
        # 60,000 deep: an argument of 120 kB, below the kernel's limit for one argument
        (f'{{"a": {deep(60_000)}}}', "argument --params: must be a JSON object: a: nested deeper"),
        ('{"size": Infinity}', "argument --params: must be a JSON object: size: must be a finite"),
    ],
    ids=["NUL", "5,000 digits", "60,000 deep", "infinity"],
)
def test_create_and_update_refuse_them_naming_the_option(database_url, params, says):
    made = cli(database_url, *CREATE, "--timezone", "UTC", "--params", "{}", "--name", "y")
    assert made.returncode == 0, made.stderr
    sid = made.stdout.split()[1].removeprefix("rt-")
    for args in (
        (*CREATE, "--timezone", "UTC", "--params", params),
        ("update", sid, "--version", "1", "--params", params),
    ):
        done = cli(database_url, *args)
        assert done.returncode == 2, (args[0], done.stdout, done.stderr)
        line = one_error_line(done)
        assert says in line, line
    assert rows(database_url, "runtime_schedules") == 1
    assert rows(database_url, "runtime_schedule_changes") == 1


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


async def test_the_python_api_refuses_them_naming_the_field(database_url):
    schedule = BASE | {"name": "x"}
    for data, says in (
        (schedule | {"params": {"label": "a\x00"}}, r"params: label: must hold no NUL"),
        (schedule | {"params": {"size": 10**5000}}, r"params: size: must be an integer within"),
        (schedule | {"params": nested(100_000)}, r"params: a\.a\.a.*: nested deeper than 32"),
        (schedule | {"params": {"size": float("nan")}}, r"params: size: must be a finite"),
        (schedule | {"paused": True, "note": "a\x00"}, r"note: must hold no control characters"),
        (schedule | {"catchup": "all", "max_missed": 10**5000}, r"max_missed: must be from 1"),
    ):
        with pytest.raises(InvalidScheduleError, match=rf"^schedule 'acme'/'x': {says}"):
            await tenants.create(database_url, data, clock=lambda: NOW)
        with pytest.raises(InvalidScheduleError, match=rf"^schedule 'acme'/'x': {says}"):
            await tenants.apply(database_url, "acme", [data], clock=lambda: NOW)
    made = await tenants.create(database_url, schedule, clock=lambda: NOW)
    for params in ({"label": "a\x00"}, {"size": 10**5000}, nested(100_000)):
        with pytest.raises(InvalidScheduleError, match=r"^schedule 'acme'/'x': params: "):
            await tenants.update(database_url, made.schedule.id, 1, {"params": params})
    assert (await tenants.get(database_url, made.schedule.id)).version == 1
    assert rows(database_url, "runtime_schedules") == 1
