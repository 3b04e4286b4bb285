-- Who paused a job (issue 43): `schedules pause --by WHO` (default `cli:<login name>`), so
-- `explain` and `next` say who paused it as well as why. NULL for a pause sync applied from
-- the catalog (`paused_by = 'sync'`: the catalog paused it) and for the rows recorded before
-- this column. Additive: the previous release inserts without it and reads none of it.
ALTER TABLE schedule_pauses ADD COLUMN requested_by text;
