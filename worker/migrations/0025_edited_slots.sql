-- Slots a timing edit stranded (issue 36, item 4; docs/calendars.md, "An edit never drops a
-- decided slot"). A business calendar runs a slot away from its own time; an edit (sync of a
-- catalog job, an update or apply of a runtime schedule) that takes effect while such a run
-- is still ahead, and whose new timing has it due before the edit (or, for a slot already
-- past, not at all), would leave it to neither timing. The edit decides it instead, by the
-- job's catch-up policy, and records the decision here: `run` (started by the edit) or
-- `dropped`. `explain` and `audit` read it. Written by the operator's tools only.
CREATE TABLE edited_slots (
    job_name     text        NOT NULL,  -- the ledger's job_name of the slot
    scheduled_at timestamptz NOT NULL,  -- the slot (its unadjusted fire time)
    edited_at    timestamptz NOT NULL,  -- when the edit took effect
    was_due_at   timestamptz NOT NULL,  -- its run under the timing before the edit
    due_at       timestamptz,           -- under the new one (before the edit); NULL: never
    outcome      text        NOT NULL CHECK (outcome IN ('run', 'dropped')),
    reason       text        NOT NULL,
    PRIMARY KEY (job_name, scheduled_at)
);
CREATE INDEX edited_slots_by_edit ON edited_slots (edited_at);
