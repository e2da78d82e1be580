-- seawall IdempotencyLayer: one row per (client scope, Idempotency-Key).
-- Applied by PostgresStore::migrate(); idempotent (safe to run from every replica at start-up).
-- The table name `seawall_idempotency` is replaced when a store is configured with another name.
CREATE TABLE IF NOT EXISTS seawall_idempotency (
    scope       TEXT        NOT NULL,            -- hex SHA-256 of the client identity
    key         TEXT        NOT NULL,            -- the Idempotency-Key (<= 255 visible ASCII)
    fingerprint BYTEA       NOT NULL,            -- SHA-256 of method, target and body
    done        BOOLEAN     NOT NULL DEFAULT FALSE,
    lease_until TIMESTAMPTZ NOT NULL,            -- in flight until then; afterwards: outcome unknown
    expires_at  TIMESTAMPTZ NOT NULL,            -- the row may be reused or purged after this
    response    BYTEA,                           -- StoredResponse::encode() once done
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS seawall_idempotency_expires_at ON seawall_idempotency (expires_at);
