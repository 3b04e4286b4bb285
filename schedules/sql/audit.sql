-- `python -m schedules audit` (schedules/audit/): read-only reads of the ledger, the commit
-- journal and the outbox, by job and by scheduled time window [from, to).

-- name: bounds
-- Each job's first and last recorded slot (before `to`).
SELECT job_name, min(scheduled_at) AS first_slot, max(scheduled_at) AS last_slot
FROM job_executions
WHERE job_name = ANY(%(jobs)s) AND scheduled_at < %(to)s
GROUP BY job_name

-- name: executions
SELECT id, job_name, scheduled_at, status, attempt, origin, workflow_id, run_id,
       started_at, finished_at, error
FROM job_executions
WHERE job_name = ANY(%(jobs)s) AND scheduled_at >= %(from)s AND scheduled_at < %(to)s
ORDER BY job_name, scheduled_at

-- name: stale_writes
-- Fenced commits made under an attempt older than one that had already taken the slot over
-- (journal order is commit order within an execution), with the outbox rows they wrote.
SELECT e.id AS execution_id, e.job_name, e.scheduled_at, c.seq AS journal_seq, c.attempt,
       c.what, c.txid, t.attempt AS newer_attempt, t.seq AS takeover_seq,
       coalesce((SELECT array_agg(o.id::text ORDER BY o.id) FROM outbox_messages o
                 WHERE o.execution_id = c.execution_id AND o.txid = c.txid), '{}') AS outbox_ids
FROM job_executions e
JOIN commit_journal c ON c.execution_id = e.id AND c.what <> 'take_over'
JOIN LATERAL (
    SELECT t.attempt, t.seq FROM commit_journal t
    WHERE t.execution_id = c.execution_id AND t.what = 'take_over'
      AND t.seq < c.seq AND t.attempt > c.attempt
    ORDER BY t.seq LIMIT 1
) t ON true
WHERE e.job_name = ANY(%(jobs)s) AND e.scheduled_at >= %(from)s AND e.scheduled_at < %(to)s
ORDER BY e.job_name, e.scheduled_at, c.seq

-- name: outbox_duplicates
-- One execution's outbox rows with the same type and payload under different keys: one
-- cause queued twice (a retry that invented a new idempotency key).
SELECT e.id AS execution_id, e.job_name, e.scheduled_at, o.type,
       array_agg(o.id::text ORDER BY o.occurred_at, o.id) AS outbox_ids,
       array_agg(o.attempt ORDER BY o.occurred_at, o.id) AS attempts,
       count(*) FILTER (WHERE o.dispatched_at IS NOT NULL) AS delivered
FROM outbox_messages o
JOIN job_executions e ON e.id = o.execution_id
WHERE e.job_name = ANY(%(jobs)s) AND e.scheduled_at >= %(from)s AND e.scheduled_at < %(to)s
GROUP BY e.id, e.job_name, e.scheduled_at, o.type, o.payload
HAVING count(*) > 1
ORDER BY e.job_name, e.scheduled_at

-- name: failed_effects
-- Outbox rows of executions that ended failed: effects of work that did not finish and was
-- not compensated.
SELECT e.id AS execution_id, e.job_name, e.scheduled_at, e.workflow_id, e.run_id,
       array_agg(o.id::text ORDER BY o.id) AS outbox_ids,
       array_agg(DISTINCT o.attempt) AS attempts
FROM job_executions e
JOIN outbox_messages o ON o.execution_id = e.id
WHERE e.status = 'failed'
  AND e.job_name = ANY(%(jobs)s) AND e.scheduled_at >= %(from)s AND e.scheduled_at < %(to)s
GROUP BY e.id
ORDER BY e.job_name, e.scheduled_at

-- name: outbox_undelivered
-- Messages queued in the window and dead, or pending for longer than `age`. Rows of other
-- producers (no execution) are included unless the audit is of chosen jobs.
SELECT o.id::text AS outbox_id, o.type, o.occurred_at, o.attempts, o.dead_at,
       o.execution_id, e.job_name, e.scheduled_at
FROM outbox_messages o
LEFT JOIN job_executions e ON e.id = o.execution_id
WHERE o.occurred_at >= %(from)s AND o.occurred_at < %(to)s
  AND o.dispatched_at IS NULL
  AND (o.dead_at IS NOT NULL OR o.occurred_at < %(pending_before)s)
  AND (NOT %(only_jobs)s OR e.job_name = ANY(%(jobs)s))
ORDER BY o.occurred_at, o.id
LIMIT %(limit)s

-- name: recheck
-- The rows of some (job, slot) pairs again, after Temporal was read: a run that claimed or
-- finished its slot meanwhile is no finding.
SELECT e.job_name, e.scheduled_at, e.status
FROM unnest(%(jobs)s::text[], %(slots)s::timestamptz[]) AS p (job_name, scheduled_at)
JOIN job_executions e USING (job_name, scheduled_at)

-- name: pauses
-- The pauses this project's tooling recorded (schedules/pauses.py) that overlap the window.
SELECT job_name, paused_at, resumed_at
FROM schedule_pauses
WHERE job_name = ANY(%(jobs)s) AND paused_at < %(to)s
  AND (resumed_at IS NULL OR resumed_at > %(from)s)
ORDER BY job_name, paused_at

-- name: backfills
-- The slots in the window that backfills recorded by this project's tooling asked for
-- (schedules/backfills.py) before `settled`, each with its newest such request.
SELECT DISTINCT ON (b.job_name, s.slot) b.job_name, s.slot, b.id, b.requested_at
FROM backfill_requests b, unnest(b.slots) AS s (slot)
WHERE b.job_name = ANY(%(jobs)s) AND b.range_start < %(to)s AND b.range_end > %(from)s
  AND s.slot >= %(from)s AND s.slot < %(to)s AND b.requested_at < %(settled)s
ORDER BY b.job_name, s.slot, b.requested_at DESC

-- name: work_started
-- When each execution's work started: its first take-over (every path to the work raises
-- the fencing token first). Slot dependencies (schedules/audit/dependencies.py).
SELECT execution_id, min(committed_at) FROM commit_journal
WHERE what = 'take_over' AND execution_id = ANY(%(ids)s::bigint[])
GROUP BY execution_id

-- name: dependency_waits
-- What each execution's wait for its upstreams decided (run_anyway: by its policy).
SELECT execution_id, status, began_at, reason, detail FROM dependency_waits
WHERE execution_id = ANY(%(ids)s::bigint[])

-- name: upstream_slots
-- An upstream's rows of the slots mapped onto the judged rows.
SELECT scheduled_at, status, finished_at, id FROM job_executions
WHERE job_name = %(job)s AND scheduled_at = ANY(%(slots)s::timestamptz[])

-- name: first_slots
-- Each job's first recorded slot.
SELECT job_name, min(scheduled_at) FROM job_executions
WHERE job_name = ANY(%(jobs)s::text[])
GROUP BY job_name

-- name: edited_in
-- The window's slots that timing edits stranded (schedules/edits.py), each with its
-- ledger row's status (NULL: none), for schedules/audit/edits.py.
SELECT e.job_name, e.scheduled_at, e.edited_at, e.was_due_at, e.due_at, e.outcome, e.reason,
       x.id AS execution_id, x.status
FROM edited_slots e
LEFT JOIN job_executions x ON x.job_name = e.job_name AND x.scheduled_at = e.scheduled_at
WHERE e.job_name = ANY(%(jobs)s) AND e.scheduled_at >= %(from)s AND e.scheduled_at < %(to)s
ORDER BY e.job_name, e.scheduled_at;
