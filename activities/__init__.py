"""Every side effect of a scheduled job: Postgres work, outbox writes, execution records."""
