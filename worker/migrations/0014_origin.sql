-- How a run came about, in the one vocabulary of the CLI and the Temporal UI: scheduled (the
-- schedule fired on time), catch-up (a missed fire time run, or recorded skipped, later),
-- manual (an operator's trigger), backfill (an older fire time run again), direct (a
-- workflow started without a schedule). It supersedes `trigger` (schedule | direct), which
-- this release no longer writes. Workers of the previous release still do during a rolling
-- deploy: their rows get the origin their trigger meant. A later migration drops `trigger`.
ALTER TABLE job_executions
    ADD COLUMN origin text
    CHECK (origin IN ('scheduled', 'catch-up', 'manual', 'backfill', 'direct'));

UPDATE job_executions
SET origin = CASE trigger WHEN 'direct' THEN 'direct' ELSE 'scheduled' END;

ALTER TABLE job_executions
    ALTER COLUMN origin SET NOT NULL,
    ALTER COLUMN trigger DROP NOT NULL,
    ALTER COLUMN trigger DROP DEFAULT;

CREATE FUNCTION job_executions_origin_from_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.origin IS NULL THEN
        NEW.origin := CASE NEW.trigger WHEN 'direct' THEN 'direct' ELSE 'scheduled' END;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER job_executions_origin
    BEFORE INSERT ON job_executions
    FOR EACH ROW EXECUTE FUNCTION job_executions_origin_from_trigger();
