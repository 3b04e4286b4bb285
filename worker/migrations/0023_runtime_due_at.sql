-- Every `on_holiday` rule for runtime schedules (docs/calendars.md): `preceding` runs a
-- slot on the business day before its own time, `modified_following` too at a month's end.
--
-- When such a slot is due: the intent stays keyed by the slot (the ledger's key); `due_at`
-- is the instant it is started and claimed at, NULL where the slot is due at its own time.
ALTER TABLE runtime_dispatch_intents ADD COLUMN due_at timestamptz;

-- The rules a schedule may store, widened (a release before writes a subset of them; deploy
-- the workers before an application creates a `preceding` schedule: a dispatcher of the
-- release before would start such a slot at its own time, late but once).
ALTER TABLE runtime_schedules
    DROP CONSTRAINT runtime_schedules_on_holiday,
    ADD CONSTRAINT runtime_schedules_on_holiday
        CHECK (on_holiday IN ('skip', 'following', 'preceding', 'modified_following'));
