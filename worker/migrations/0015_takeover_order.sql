-- Which Temporal activity attempt holds the slot, so an older attempt can never take it over.
--
-- `attempt` (the fencing token) counts take-overs; it cannot tell an old attempt from a new
-- one. The server may hand several retries of one activity to a frozen worker's open polls;
-- woken after a live worker took the slot over, those older attempts would each take it
-- back and fence the live one out. A take-over now records the workflow run that scheduled
-- the activity, the activity's sequence number in that run and its Temporal attempt, and
-- a take-over by an attempt that comes before the holder's in that order is refused
-- (activities/executions.py). NULL: taken over by a worker of the previous release, or not
-- yet taken over; such a holder is ordered before any attempt.
ALTER TABLE job_executions
    ADD COLUMN holder_run_id text,
    ADD COLUMN holder_activity_seq bigint,
    ADD COLUMN holder_attempt integer;
