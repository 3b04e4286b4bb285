-- The HTTP API's keys and its Idempotency-Key records (issue 38, item 3; api/keys.py,
-- docs/api.md). Additive: the previous release reads none of it.

-- A key is `sjk_<id>_<secret>`: the id finds its row, the secret (32 random bytes from
-- `secrets`) is checked against `secret_sha256`; the key itself is never stored. A tenant
-- key's `tenant` is set; the operator role's is NULL (it sees every tenant).
CREATE TABLE api_keys (
    id             bigserial   PRIMARY KEY,
    tenant         text,
    role           text        NOT NULL CHECK (role IN ('tenant', 'operator')),
    secret_sha256  bytea       NOT NULL CHECK (length(secret_sha256) = 32),
    created_at     timestamptz NOT NULL DEFAULT now(),
    created_by     text        NOT NULL DEFAULT '',
    note           text        NOT NULL DEFAULT '',
    revoked_at     timestamptz,
    CHECK ((role = 'tenant') = (tenant IS NOT NULL))
);

-- A create sent with an `Idempotency-Key` header: the same key (of the same API key) again
-- answers with the schedule it made, and with another body is refused. The SHA-256 of the
-- request body tells the two apart.
CREATE TABLE api_idempotency_keys (
    key_id           bigint      NOT NULL REFERENCES api_keys (id),
    idempotency_key  text        NOT NULL,
    request_sha256   bytea       NOT NULL,
    schedule_id      bigint      NOT NULL REFERENCES runtime_schedules (id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_id, idempotency_key)
);
