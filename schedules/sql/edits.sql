-- Slots a timing edit stranded, and what it decided (schedules/edits.py; migration 0025).

-- name: ledgered
SELECT scheduled_at FROM job_executions
WHERE job_name = %(job)s AND scheduled_at = ANY(%(slots)s);

-- name: record
INSERT INTO edited_slots
    (job_name, scheduled_at, edited_at, was_due_at, due_at, outcome, reason)
SELECT %(job)s, s.slot, %(edited_at)s, s.was_due, s.due, s.outcome, s.reason
FROM unnest(%(slots)s::timestamptz[], %(was_due)s::timestamptz[], %(due)s::timestamptz[],
            %(outcomes)s::text[], %(reasons)s::text[]) AS s(slot, was_due, due, outcome, reason)
ON CONFLICT (job_name, scheduled_at) DO UPDATE
SET edited_at = EXCLUDED.edited_at, was_due_at = EXCLUDED.was_due_at,
    due_at = EXCLUDED.due_at, outcome = EXCLUDED.outcome, reason = EXCLUDED.reason;
