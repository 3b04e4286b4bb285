-- The contract step of 0014: `job_executions.trigger` (schedule | direct), which `origin`
-- superseded in v3, and the insert trigger that gave the rows of `v2` workers the origin
-- their trigger meant during the rolling deploy to v3. No release since v3 writes or reads
-- the column, so the previous release runs beside this one and after a rollback
-- (docs/deploy.md, "Migrations a previous release can run against").
DROP TRIGGER job_executions_origin ON job_executions;
DROP FUNCTION job_executions_origin_from_trigger();
ALTER TABLE job_executions DROP COLUMN trigger;
