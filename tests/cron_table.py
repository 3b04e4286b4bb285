"""Malformed crons, each with the field and the value its error must name (`timing.cron`).

`field` is the cron's own field (`day-of-month` ...), or `cron` when the whole expression
is wrong (field count, alias, time zone prefix); `value` is what the message quotes.
Shared by the grammar's unit tests and the CLI test of `validate`, `next` and `sync`.
"""

from __future__ import annotations

MALFORMED: list[tuple[str, str, str]] = [
    # out of range
    ("61 2 * * *", "minute", "61"),
    ("0 24 * * *", "hour", "24"),
    ("0 0 32 * *", "day-of-month", "32"),
    ("0 0 0 * *", "day-of-month", "0"),
    ("0 0 * 13 *", "month", "13"),
    ("0 0 * 0 *", "month", "0"),
    ("0 0 * * 8", "day-of-week", "8"),
    ("0 0 * * sun,8", "day-of-week", "sun,8"),
    ("60 0 0 * * * *", "second", "60"),
    ("0 0 * * * 1999", "year", "1999"),
    ("0 0 * * * 2101", "year", "2101"),
    # field counts
    ("0 0 * *", "cron", "0 0 * *"),
    ("0 0 0 1 1 * * 2030", "cron", "0 0 0 1 1 * * 2030"),
    ("0 30 2 * * *", "cron", "0 30 2 * * *"),  # seconds first, as in Quartz or Spring
    ("", "cron", ""),
    # dates that never come
    ("0 0 30 2 *", "day-of-month", "30"),
    ("0 0 31 4,6,9,11 *", "day-of-month", "31"),
    ("0 0 29 2 * 2027", "day-of-month", "29"),
    # aliases and prefixes
    ("@reboot", "cron", "@reboot"),
    ("@every 5m", "cron", "@every 5m"),
    ("@fortnightly", "cron", "@fortnightly"),
    ("TZ=Europe/London 0 9 * * *", "cron", "TZ=Europe/London 0 9 * * *"),
    # other dialects
    ("0 9 L * *", "day-of-month", "L"),
    ("0 9 15W * *", "day-of-month", "15W"),
    ("0 9 * * 5#2", "day-of-week", "5#2"),
    ("H 9 * * *", "minute", "H"),
    ("0 9 ? * 1", "day-of-month", "?"),
    # names
    ("0 0 * * monday", "day-of-week", "monday"),
    ("0 0 * janu *", "month", "janu"),
    ("0 0 * * jan", "day-of-week", "jan"),
    # malformed lists, ranges and steps
    ("*/0 * * * *", "minute", "*/0"),
    ("5-1 * * * *", "minute", "5-1"),
    ("0 0 1,,2 * *", "day-of-month", "1,,2"),
    ("0 0 * * 1-", "day-of-week", "1-"),
    ("1/2/3 * * * *", "minute", "1/2/3"),
]
