"""When a job fires: cron grammar, time zones, DST rules, fire times and their Temporal
calendars. A leaf: it imports nothing of the project's but `core.errors`.

`Timing` is the one answer to "when does this job fire" (`timing.value`); `zone` and
`TZDATA_VERSION` are the one time zone database (`timing.zones`); `TICK` is the step that
turns an exclusive end inclusive.
"""

from timing.value import Timing
from timing.zones import TICK, TZDATA_VERSION, UnknownZoneError, zone

__all__ = ["TICK", "TZDATA_VERSION", "Timing", "UnknownZoneError", "zone"]
