"""The catalog's problems as the lines it prints: each names the job, the field and the value."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from jobs import kinds
from timing.value import TimingProblems


class Problems(ValueError):
    """Several problems of one job, each already "field: message" (never re-split)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def timing_problems(job: Any) -> list[str]:
    """The problems of the job's timing as a whole, found by building it: the `Timing`
    refuses what it cannot be (both or neither of cron and interval, bounds out of order,
    a jitter as long as the period). Its fields were checked already, by the same types."""
    try:
        job.timing  # noqa: B018 - built for its validation
    except ValidationError as exc:
        found = []
        for err in exc.errors():
            cause = (err.get("ctx") or {}).get("error")
            if isinstance(cause, TimingProblems):
                found += cause.problems
            else:
                found.append(err["msg"].removeprefix("Value error, "))
        return found
    return []


def params_problems(kind: str, params: dict[str, Any]) -> list[str]:
    """The params' problems against the kind's model; an unknown key is one of them (a
    mistyped `chunk_sise` would otherwise be ignored and the default used)."""
    model = kinds()[kind].params
    problems = []
    if model.model_config.get("extra") != "allow":
        known = {info.alias or name for name, info in model.model_fields.items()}
        for key in sorted(set(params) - known):
            problems.append(
                f"params.{key}: not a parameter of kind {kind!r} "
                f"(it takes {', '.join(sorted(known)) or 'none'})"
            )
    try:
        model.model_validate(params)
    except ValidationError as exc:
        for err in exc.errors():
            if err["type"] == "extra_forbidden":
                continue  # said above
            where = ".".join(str(p) for p in err["loc"])
            problems.append(f"params.{where}: {err['msg']} (got {short(err.get('input'))})")
    return problems


def short(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an integer longer than the interpreter writes (4,300 digits)
        text = f"<an integer of {value.bit_length()} bits>"
    return text if len(text) <= 80 else text[:77] + "..."


def format_error(job_id: str, err: dict) -> list[str]:
    field = ".".join(str(p) for p in err["loc"]) or None
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, Problems):  # model-level: a list of "field: message"
        prefix = f"{field}." if field else ""
        return [f"job {job_id!r}: {prefix}{problem}" for problem in cause.problems]
    message = err["msg"].removeprefix("Value error, ")
    if field is None:
        return [f"job {job_id!r}: {message}"]
    shown = err.get("input")
    value = (
        "" if isinstance(shown, dict) or repr(shown)[:60] in message else f" (got {short(shown)})"
    )
    if err["type"] == "missing":
        return [f"job {job_id!r}: {field}: is required"]
    return [f"job {job_id!r}: {field}: {message}{value}"]
