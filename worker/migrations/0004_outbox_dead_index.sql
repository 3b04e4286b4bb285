-- The metrics endpoint counts dead outbox messages at every scrape (worker/gauges.py);
-- without this index that count reads the whole table. Dead messages are few: it stays small.
CREATE INDEX outbox_messages_dead ON outbox_messages (dead_at) WHERE dead_at IS NOT NULL;
