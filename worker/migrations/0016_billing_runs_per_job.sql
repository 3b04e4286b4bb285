-- monthly-billing's claims per job: each job of the kind opens its own billing run of a month
-- (keyed by the month alone, a second job's run was refused the first one's month). A
-- subscription is still invoiced once a month, whatever the job: an invoice belongs to the
-- job whose run made it, and a run charges, voids and receipts its own job's invoices only.
-- Existing rows get the job of the execution that opened the month (a month had one run).
ALTER TABLE billing_runs ADD COLUMN job_name text;
UPDATE billing_runs r SET job_name = e.job_name
FROM job_executions e
WHERE e.id = r.execution_id;
ALTER TABLE billing_runs ALTER COLUMN job_name SET NOT NULL;
ALTER TABLE billing_runs DROP CONSTRAINT billing_runs_pkey;
ALTER TABLE billing_runs ADD PRIMARY KEY (job_name, month);

ALTER TABLE invoices ADD COLUMN billing_job text;
UPDATE invoices i SET billing_job = r.job_name
FROM billing_runs r
WHERE r.month = i.billing_month;
UPDATE invoices SET billing_job = 'monthly-billing'
WHERE billing_month IS NOT NULL AND billing_job IS NULL;
ALTER TABLE invoices ADD CONSTRAINT invoices_billing_job_with_month
    CHECK ((billing_job IS NULL) = (billing_month IS NULL));
DROP INDEX invoices_by_billing_month;
CREATE INDEX invoices_by_billing_job_month
    ON invoices (billing_job, billing_month, id) WHERE billing_month IS NOT NULL;

-- Workers of the previous release, during a rolling deploy, write neither column: their rows
-- get the job from the execution, or for an invoice from its month's open billing run. (Their
-- `open_run` fails, its ON CONFLICT (month) no longer has a key to match: Temporal retries the
-- step, and a worker of this release runs it.) A later migration drops both triggers.
CREATE FUNCTION billing_runs_job_from_execution() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.job_name IS NULL THEN
        NEW.job_name := (SELECT job_name FROM job_executions WHERE id = NEW.execution_id);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER billing_runs_job
    BEFORE INSERT ON billing_runs
    FOR EACH ROW EXECUTE FUNCTION billing_runs_job_from_execution();

CREATE FUNCTION invoices_billing_job_from_run() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.billing_month IS NOT NULL AND NEW.billing_job IS NULL THEN
        NEW.billing_job := (SELECT job_name FROM billing_runs
                            WHERE month = NEW.billing_month AND status = 'open'
                            ORDER BY opened_at DESC LIMIT 1);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER invoices_billing_job
    BEFORE INSERT ON invoices
    FOR EACH ROW EXECUTE FUNCTION invoices_billing_job_from_run();
