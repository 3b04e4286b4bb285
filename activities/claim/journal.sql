-- The commit journal (worker/migrations/0017_commit_journal.sql): evidence of which attempt
-- committed what, read by `python -m schedules audit`.

-- name: enter
-- Outbox rows written in this transaction name its execution and attempt (the columns'
-- defaults read these transaction-local settings).
SELECT set_config('schedules.execution_id', %(id)s::text, true),
       set_config('schedules.attempt', %(attempt)s::text, true)

-- name: record
-- The last statement of a fenced transaction: what it committed, under which token.
INSERT INTO commit_journal (execution_id, attempt, what, status)
SELECT %(id)s, %(attempt)s, %(what)s, status FROM job_executions WHERE id = %(id)s
