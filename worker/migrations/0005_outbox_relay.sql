-- The outbox relay (activities/relay.py) claims pending messages with a short lease: one
-- committed UPDATE moves `next_attempt_at` past the lease and stamps the claim, then the
-- messages are delivered outside any transaction. A relay that dies mid-batch holds no lock;
-- its messages come due again when the lease runs out.
ALTER TABLE outbox_messages
    -- The batch that holds the lease now; a relay records a failure only under its own claim.
    ADD COLUMN claim_token  uuid,
    -- Which relay (host:pid) claimed the message last, for operators.
    ADD COLUMN claimed_by   text,
    ADD COLUMN claimed_at   timestamptz;
