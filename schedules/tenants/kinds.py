"""The job kinds a runtime schedule may name, each with its params model and batch flag.

Job families declare theirs in `RUNTIME_KINDS` (`activities.run.kinds.RuntimeKind`, found by
`jobs.runtime_kinds()`), so the worker's dispatcher and this API read the same registry
(`test-noop`, the tests' and benches' kind, is one: `jobs/runtime_noop`). `register_kind`
adds one in this process only (a test, or an application trying a kind out before its
family ships it to the workers).
"""

from __future__ import annotations

from datetime import timedelta

from activities.run.kinds import RuntimeKind
from core.errors import InvalidScheduleError
from jobs import runtime_kinds as declared_kinds

__all__ = [
    "DEFAULT_ALLOWANCE",
    "RuntimeKind",
    "allowance_of",
    "register_kind",
    "runtime_kind",
    "runtime_kinds",
]

# A kind's allowance when it gives none, and of a kind this process does not know.
DEFAULT_ALLOWANCE: timedelta = RuntimeKind.__dataclass_fields__["allowance"].default

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
    return {**declared_kinds(), **_registered}


def runtime_kind(name: str) -> RuntimeKind:
    """The runtime kind `name`, or `InvalidScheduleError` naming the known ones."""
    kinds = runtime_kinds()
    if name not in kinds:
        raise InvalidScheduleError(
            f"kind: unknown runtime kind {name[:80]!r}; known: {', '.join(sorted(kinds))}"
        )
    return kinds[name]


def allowance_of(kind: str) -> timedelta:
    """How long after it was due a slot of `kind` may complete (`RuntimeKind.allowance`;
    the default for a kind this process does not know, one a schedule named before its
    family left the workers)."""
    known = runtime_kinds().get(kind)
    return known.allowance if known is not None else DEFAULT_ALLOWANCE
