-- hourly-sync's state per job: two jobs of that kind (one hourly, one every two hours, or
-- two event sources) each claim their own windows and keep their own totals, even where
-- their windows start at the same time. Existing rows get the job that wrote them (through
-- its execution, or for totals through their window), else 'hourly-sync', the catalog's
-- only job of this kind until now.
ALTER TABLE sync_windows ADD COLUMN job_name text;
UPDATE sync_windows w SET job_name = e.job_name
FROM job_executions e
WHERE e.id = w.execution_id;
UPDATE sync_windows SET job_name = 'hourly-sync' WHERE job_name IS NULL;
ALTER TABLE sync_windows ALTER COLUMN job_name SET NOT NULL;
ALTER TABLE sync_windows DROP CONSTRAINT sync_windows_pkey;
ALTER TABLE sync_windows ADD PRIMARY KEY (job_name, window_start);

-- Until now a window start was unique, so each total belongs to the one window starting then.
ALTER TABLE hourly_account_totals ADD COLUMN job_name text;
UPDATE hourly_account_totals t SET job_name = w.job_name
FROM sync_windows w
WHERE w.window_start = t.window_start;
UPDATE hourly_account_totals SET job_name = 'hourly-sync' WHERE job_name IS NULL;
ALTER TABLE hourly_account_totals ALTER COLUMN job_name SET NOT NULL;
ALTER TABLE hourly_account_totals DROP CONSTRAINT hourly_account_totals_pkey;
ALTER TABLE hourly_account_totals ADD PRIMARY KEY (job_name, window_start, account_id);
