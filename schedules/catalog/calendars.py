"""The catalog's business calendars: the `[calendars]` table of `jobs.toml`, and the names a
job's `calendar` may give.

```toml
[calendars.ops-uk]                  # a calendar of the catalog's own
base = "GB-ENG"                     # the holidays package's England (optional)
extra_holidays = [2027-06-07]       # closed on top of the base's holidays
extra_working_days = [2027-12-28]   # open although the base says otherwise
```

A job names one of these, or a market or country of the `holidays` package directly
(`calendar = "NYSE"`, `"US"`, `"GB-ENG"`): `timing.business` holds the semantics. A name of
the catalog's own may not shadow one of the package's (`NYSE` always means the package's
NYSE), so a reader never has to guess which one a job means.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError, ValidationInfo

from timing.business import EARLY_CLOSES, BusinessCalendar, known_base

CALENDARS_TABLE = "calendars"
"""The catalog's table of calendars; a job cannot be called this."""
CALENDAR_FIELDS = ("calendar", "on_holiday", "calendar_definition")
"""A job's (and a runtime schedule's) calendar fields: all unset for one without."""
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def parse_calendars(table: Any) -> tuple[dict[str, BusinessCalendar], dict[str, list[str]]]:
    """The catalog's calendars by name, and the problems of the invalid ones (each line
    naming the calendar, the field and the value), under `CALENDARS_TABLE`."""
    if table is None:
        return {}, {}
    where = f"[{CALENDARS_TABLE}]"
    if not isinstance(table, dict):
        return {}, {CALENDARS_TABLE: [f"{where}: must be a table of calendars, got {table!r:.80}"]}
    found: dict[str, BusinessCalendar] = {}
    problems: list[str] = []
    for name, entry in table.items():
        prefix = f"calendar {name!r}"
        if not _NAME.match(name):
            problems.append(
                f"{prefix}: a name is a letter then letters, digits, - or _ (64 at most)"
            )
        elif known_base(name):
            problems.append(
                f"{prefix}: is the holidays package's own calendar {name}; name yours "
                f"differently and give `base = {name!r}`"
            )
        elif not isinstance(entry, dict):
            problems.append(
                f"{prefix}: must be a table (base, extra_holidays, ...), got {entry!r:.80}"
            )
        elif "name" in entry:
            problems.append(f"{prefix}: name: is not a setting; the table's name is the calendar's")
        else:
            try:
                found[name] = BusinessCalendar.model_validate({**entry, "name": name})
            except ValidationError as exc:
                problems += [_line(prefix, err) for err in exc.errors()]
    return found, ({CALENDARS_TABLE: problems} if problems else {})


def _line(prefix: str, err: Any) -> str:
    field = ".".join(str(p) for p in err["loc"][:1])
    message = err["msg"].removeprefix("Value error, ")
    shown = err.get("input")
    plain = not isinstance(shown, dict | list | tuple) and repr(shown)[:60] not in message
    got = f" (got {shown!r:.80})" if plain else ""
    if err["type"] == "extra_forbidden":
        message = "is not a setting (a calendar takes base, extra_holidays, extra_working_days)"
    return f"{prefix}: {field or 'calendar'}: {message}{got}"


def resolve_calendar(name: str, defined: dict[str, BusinessCalendar]) -> BusinessCalendar | None:
    """The calendar a job's `calendar = name` means: the catalog's own, else the
    package's market or country of that code; None when neither has it."""
    if name in defined:
        return defined[name]
    if known_base(name):
        return BusinessCalendar(name=name, base=name)
    return None


def calendar_problems(job: Any) -> list[str]:
    """A job's calendar problems (a `JobSpec`'s): an unknown calendar, an `on_holiday`
    without one, or an `on_early_close` its calendar cannot follow."""
    early = getattr(job, "on_early_close", None)
    if job.calendar is None:
        if job.on_holiday is not None:
            return [
                "on_holiday: needs a calendar to say which days are holidays "
                f"(got {job.on_holiday!r})"
            ]
        if early is not None:
            return [
                "on_early_close: needs a market calendar to say which days close early "
                f"(got {early!r}; markets: {', '.join(EARLY_CLOSES)})"
            ]
        if job.calendar_definition is not None:
            return ["calendar_definition: is filled in from `calendar`, never set"]
        return []
    if job.calendar_definition is None:
        return [
            f"calendar: unknown calendar {job.calendar[:80]!r}: neither one of the catalog's "
            f"[{CALENDARS_TABLE}] nor a market or country of the holidays package "
            "(e.g. 'NYSE', 'US', 'GB-ENG')"
        ]
    if job.calendar_definition.name != job.calendar:
        return [
            f"calendar: {job.calendar!r} does not name its definition "
            f"({job.calendar_definition.name!r})"
        ]
    if early not in (None, "keep"):
        market = EARLY_CLOSES.get(job.calendar_definition.base or "")
        if market is None:
            return [
                f"on_early_close: calendar {job.calendar!r} has no early closes this project "
                f"knows the hour of (got {early!r}; markets: {', '.join(EARLY_CLOSES)})"
            ]
        if job.timezone != market[0]:
            return [
                f"on_early_close: the job's timezone must be its market's, {market[0]}, to "
                f"follow its close (got timezone {job.timezone!r})"
            ]
    return []


def define_calendar(cls: type, data: Any, info: ValidationInfo) -> Any:
    """A job table with `calendar_definition` filled in from its `calendar` name: the
    catalog's own `[calendars]`, else the `holidays` package's. A table that sets the
    definition itself is refused (`calendar_problems`), unless it is an entry read back
    from a schedule's memo, which carries it with the same name."""
    if not isinstance(data, dict) or not isinstance(data.get("calendar"), str):
        return data
    if data.get("calendar_definition") is not None:
        return data
    defined = (info.context or {}).get("calendars", {})
    found = resolve_calendar(data["calendar"], defined)
    return data if found is None else data | {"calendar_definition": found}
