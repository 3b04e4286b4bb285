-- Evidence for `python -m schedules audit`: which execution and attempt wrote each outbox row
-- and each fenced transaction, in commit order, written in the same transactions as the
-- effects. Rows from before this migration, and outbox rows of other producers, keep NULLs.
--
-- commit_journal: one row per fenced transaction (a chunk, a step's batch, a completion) and
-- one per take-over (an attempt raising the fencing token). Within one execution the rows
-- are in commit order: every fenced transaction holds the execution row's lock until it
-- commits, and writes its journal row last. `txid` ties a row to the outbox rows of the
-- same transaction.
CREATE TABLE commit_journal (
    seq           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id  bigint      NOT NULL REFERENCES job_executions (id) ON DELETE CASCADE,
    -- The fencing token (job_executions.attempt) the transaction committed under.
    attempt       integer     NOT NULL,
    -- What was committed: take_over, plan, chunk, complete, step:<name>, finish_steps.
    what          text        NOT NULL,
    -- The execution's status as the transaction left it.
    status        text,
    txid          bigint      NOT NULL DEFAULT txid_current(),
    committed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX commit_journal_by_execution ON commit_journal (execution_id, seq);

-- Take-overs are journaled by the table itself, whichever code path raises the token.
CREATE FUNCTION job_executions_journal_take_over() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_journal (execution_id, attempt, what, status)
    VALUES (NEW.id, NEW.attempt, 'take_over', NEW.status);
    RETURN NEW;
END
$$;

CREATE TRIGGER job_executions_take_over
    AFTER UPDATE OF attempt ON job_executions
    FOR EACH ROW WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION job_executions_journal_take_over();

-- Outbox rows name the execution and attempt whose fenced transaction wrote them. The
-- fenced transaction sets them as transaction-local settings (activities/journal.py) and
-- the columns' defaults read them, so no job's INSERT has to name them; a producer outside
-- a fenced transaction leaves them NULL. (Defaults, not a row trigger: a set-based insert
-- of a million messages pays no PL/pgSQL call per row.)
ALTER TABLE outbox_messages
    ADD COLUMN execution_id bigint,
    ADD COLUMN attempt      integer,
    ADD COLUMN txid         bigint;
-- Set apart from ADD COLUMN: existing rows keep NULL, and the table is not rewritten.
ALTER TABLE outbox_messages
    ALTER COLUMN execution_id
        SET DEFAULT nullif(current_setting('schedules.execution_id', true), '')::bigint,
    ALTER COLUMN attempt
        SET DEFAULT nullif(current_setting('schedules.attempt', true), '')::integer,
    ALTER COLUMN txid SET DEFAULT txid_current();
CREATE INDEX outbox_messages_by_execution ON outbox_messages (execution_id)
    WHERE execution_id IS NOT NULL;
