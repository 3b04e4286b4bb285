-- Pause on repeated failure (issue 40, item 3): a runtime schedule with
-- pause_after_failures = K is paused (paused_by 'auto', a note naming the slots and the
-- last error) in the transaction that records its K-th consecutive failed slot since its
-- last resume (activities/auto_pause.py). NULL: never. Additive: the previous release
-- reads none of it.
ALTER TABLE runtime_schedules ADD COLUMN pause_after_failures integer
    CHECK (pause_after_failures BETWEEN 1 AND 1000);

-- A catalog job's schedule paused the same way (pause_after_failures in the catalog) is
-- recorded with paused_by 'auto'. The previous release reads such a row as the catalog's.
ALTER TABLE schedule_pauses DROP CONSTRAINT schedule_pauses_paused_by_check;
ALTER TABLE schedule_pauses ADD CONSTRAINT schedule_pauses_paused_by_check
    CHECK (paused_by IN ('pause', 'sync', 'auto'));
