-- Quiet plumbing (issue 43, item 1): the engine's long-running sessions (the runtime
-- dispatchers, the outbox relay) sleep until their next due time and are woken by a write.
--
-- Every statement that writes a runtime schedule, an intent or the dispatch shards'
-- count notifies `runtime_due`; every one that writes an outbox message notifies
-- `outbox_due`. The notification is sent at commit (never for a rolled-back write), once
-- per transaction whatever the number of rows: a herd's insert is one wake-up. The
-- listener re-reads its next due time from the tables; a wake-up it missed (its
-- connection dropped) costs at most its re-check interval, never a slot
-- (jobs/runtime_dispatch/session.py, core/wakeups.py).
CREATE FUNCTION notify_runtime_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('runtime_due', '');
    RETURN NULL;
END $$;

CREATE FUNCTION notify_outbox_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_due', '');
    RETURN NULL;
END $$;

CREATE TRIGGER runtime_schedules_wake AFTER INSERT OR UPDATE ON runtime_schedules
    FOR EACH STATEMENT EXECUTE FUNCTION notify_runtime_due();
CREATE TRIGGER runtime_dispatch_intents_wake AFTER INSERT ON runtime_dispatch_intents
    FOR EACH STATEMENT EXECUTE FUNCTION notify_runtime_due();
CREATE TRIGGER runtime_dispatch_shards_wake AFTER INSERT ON runtime_dispatch_shards
    FOR EACH STATEMENT EXECUTE FUNCTION notify_runtime_due();
CREATE TRIGGER outbox_messages_wake AFTER INSERT OR UPDATE OF next_attempt_at ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION notify_outbox_due();
