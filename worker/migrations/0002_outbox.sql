-- Effects that leave the database (email, webhooks) are written here in the same
-- transaction as the change that causes them, and delivered later by a relay.
CREATE TABLE outbox_messages (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    type             text        NOT NULL,
    payload          jsonb       NOT NULL,
    -- One message per cause, even if the writing transaction somehow ran twice.
    idempotency_key  text        NOT NULL UNIQUE,
    occurred_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at    timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    dead_at          timestamptz
);

CREATE INDEX outbox_messages_pending ON outbox_messages (next_attempt_at)
    WHERE dispatched_at IS NULL AND dead_at IS NULL;
