"""The catalog parser on generated input.

- A random valid catalog, written out as TOML here, validates to jobs holding exactly the
  values generated (the round trip).
- A random byte-level mutation of a valid catalog is either valid or refused by
  `validate`'s own path with a `SchedulerError` (exit 2) and the documented message: one
  line for one problem, else a count and one line each. Never another exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import tomllib
from argparse import Namespace
from datetime import timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, note, settings
from hypothesis import strategies as st

from core.errors import SchedulerError
from schedules.catalog.model import default_catalog, parse_catalog
from schedules.cli import validate
from schedules.cli.context import Context

# One job of each kind as the packaged catalog has it (params are the kind's business);
# the timing and policy fields are generated around them.
PACKAGED = {job.kind: job for job in default_catalog().values()}
CRONS = ["30 2 * * *", "*/5 * * * *", "0 9 * * 1-5", "0 0 1 * *", "15 */2 * * *", "@daily"]
ZONES = ["UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo"]
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

ids = st.from_regex(r"\A[a-z][a-z0-9]{0,7}(-[a-z0-9]{1,6}){0,2}\Z")
# TOML basic strings: no lone surrogates, no DEL (which TOML wants escaped).
texts = st.text(
    alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x7f"), max_size=40
)


@st.composite
def durations(draw, low: int, high: int) -> tuple[str, timedelta]:
    unit = draw(st.sampled_from(sorted(UNITS)))
    count = draw(st.integers(max(1, low // UNITS[unit]), max(1, high // UNITS[unit])))
    return f"{count}{unit}", timedelta(seconds=count * UNITS[unit])


@st.composite
def jobs(draw, kind: str) -> dict:
    """One job's table: the TOML values (`toml`) and what each field must read as (`want`)."""
    toml: dict[str, object] = {"kind": kind}
    want: dict[str, object] = {"kind": kind}
    if draw(st.booleans()):
        toml["cron"] = want["cron"] = draw(st.sampled_from(CRONS))
        if draw(st.booleans()):
            toml["calendar"] = want["calendar"] = draw(st.sampled_from(["NYSE", "US", "GB-ENG"]))
            rules = ["skip", "following", "preceding", "modified_following"]
            toml["on_holiday"] = want["on_holiday"] = draw(st.sampled_from(rules))
    else:
        toml["interval"], want["interval"] = draw(durations(60, 86400))
    toml["timezone"] = want["timezone"] = draw(st.sampled_from(ZONES))
    for name in ("description", "owner", "note"):
        if draw(st.booleans()):
            toml[name] = want[name] = draw(texts)
    toml["overlap"] = want["overlap"] = draw(
        st.sampled_from(["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"])
    )
    toml["catchup"] = want["catchup"] = draw(st.sampled_from(["skip", "latest", "all"]))
    if want["catchup"] == "all":
        toml["max_missed"] = want["max_missed"] = draw(st.integers(1, 100))
    toml["timeout"], want["timeout"] = draw(durations(60, 6 * 3600))
    toml["paused"] = want["paused"] = draw(st.booleans())
    toml["params"] = want["params"] = dict(PACKAGED[kind].params)
    return {"toml": toml, "want": want}


@st.composite
def catalogs(draw) -> dict[str, dict]:
    kinds = [k for k, job in PACKAGED.items() if not job.depends_on]
    names = draw(st.lists(ids, min_size=1, max_size=4, unique=True))
    return {name: draw(jobs(draw(st.sampled_from(kinds)))) for name in names}


def value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
    raise AssertionError(f"no TOML for {v!r}")


def to_toml(catalog: dict[str, dict]) -> str:
    lines = []
    for name, job in catalog.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {value(v)}" for key, v in job["toml"].items()]
        lines.append("")
    return "\n".join(lines)


@given(catalogs())
def test_a_valid_catalog_round_trips(catalog) -> None:
    text = to_toml(catalog)
    note(text)
    parsed = {job.id: job for job in parse_catalog(tomllib.loads(text))}
    assert sorted(parsed) == sorted(catalog)
    for name, job in catalog.items():
        for field, want in job["want"].items():
            assert getattr(parsed[name], field) == want, (name, field)


def validate_file(path: Path) -> tuple[int, str]:
    """`validate --catalog PATH` in this process: its exit code and what it said. Only the
    project's own errors are caught."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            return asyncio.run(validate.run(Namespace(catalog=path), Context())), out.getvalue()
    except SchedulerError as exc:
        return exc.exit_code, str(exc)


@st.composite
def mutations(draw, text: bytes) -> bytes:
    data = bytearray(text)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        what = draw(st.sampled_from(["replace", "insert", "delete"]))
        byte = draw(st.one_of(st.integers(0, 255), st.sampled_from(list(b'"=[]{},.#\n\\ 0-:@*/'))))
        if what == "insert" or at == len(data):
            data[at:at] = bytes([byte])
        elif what == "replace":
            data[at] = byte
        else:
            del data[at]
    return bytes(data)


@settings(max_examples=settings.default.max_examples * 2)
@given(st.data())
def test_a_mutated_catalog_is_valid_or_refused_in_one_line(data) -> None:
    catalog = data.draw(catalogs())
    mutated = data.draw(mutations(to_toml(catalog).encode()))
    note(repr(mutated))
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.toml"
        path.write_bytes(mutated)
        code, said = validate_file(path)
    assert code in (0, 2), said
    if code == 0:
        assert said.startswith("catalog ok: ")
        return
    first, *rest = said.splitlines()
    assert first.strip() and "Traceback" not in said
    if rest:  # several problems: a count, then one line each
        assert first.startswith("the catalog has ") and all(r.startswith("  ") for r in rest)
