-- seawall IdempotencyLayer: the owner of an in-flight row (a random 16-byte token per request).
-- Applied by PostgresStore::migrate() after 0001; idempotent. Rows written before it have no
-- owner: no request settles them, and their lease and expiry end them as before.
ALTER TABLE seawall_idempotency ADD COLUMN IF NOT EXISTS owner BYTEA;
