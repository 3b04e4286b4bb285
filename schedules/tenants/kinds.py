"""The job kinds a runtime schedule may name, each with its params model and batch flag.

Job families declare theirs in `RUNTIME_KINDS` (`activities.kinds.RuntimeKind`, found by
`jobs.runtime_kinds()`), so the worker's dispatcher and this API read the same registry.
`register_kind` adds one in this process only (a test, or an application trying a kind out
before its family ships it to the workers).

`test-noop` is built in: a kind with one small parameter, for the tests and benches of the
storage and the API. Its slots are recorded like any other's; it does no work. A job family
that declares a kind of that name (so the workers run it) takes its place.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from activities.kinds import RuntimeKind
from core.errors import InvalidScheduleError
from jobs import runtime_kinds as declared_kinds

__all__ = ["TEST_KIND", "RuntimeKind", "register_kind", "runtime_kind", "runtime_kinds"]


class NoopParams(BaseModel):
    """`test-noop`'s params: a label and a size, so validation has something to refuse."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(default="", max_length=200)
    size: int = Field(default=1, ge=1, le=1000)


TEST_KIND = RuntimeKind(
    name="test-noop",
    params_model=NoopParams,
    batch=True,
    description="does nothing: for the tests and benches of runtime schedules",
)

_registered: dict[str, RuntimeKind] = {}


def register_kind(kind: RuntimeKind) -> RuntimeKind:
    """Make `kind` usable by runtime schedules in this process; returns it. A name already
    declared by a job family, or registered, is refused (`ValueError`)."""
    if kind.name in runtime_kinds():
        raise ValueError(f"runtime kind {kind.name!r} is already registered")
    _registered[kind.name] = kind
    return kind


def runtime_kinds() -> dict[str, RuntimeKind]:
    """Every runtime kind by name: the job families' and this process's registered ones."""
    return {TEST_KIND.name: TEST_KIND, **declared_kinds(), **_registered}


def runtime_kind(name: str) -> RuntimeKind:
    """The runtime kind `name`, or `InvalidScheduleError` naming the known ones."""
    kinds = runtime_kinds()
    if name not in kinds:
        raise InvalidScheduleError(
            f"kind: unknown runtime kind {name[:80]!r}; known: {', '.join(sorted(kinds))}"
        )
    return kinds[name]
