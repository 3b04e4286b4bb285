"""When a job fires: cron grammar, time zones, DST rules, fire times and their Temporal
calendars. A leaf: it imports nothing of the project's but `core.errors`."""
