-- How long after a job's last success its next one is overdue (the longest gap between its
-- fire times + jitter + alert_grace, from the catalog, carried in the schedule's run input):
-- recorded with each claim so the workers export it as `scheduled_job_alert_after_seconds`,
-- and the not-completed alert needs no per-job rule.
ALTER TABLE job_executions ADD COLUMN alert_after_seconds double precision;
