//! [`PostgresStore`]: one table shared by a fleet of replicas (feature `postgres`).
//!
//! The schema ships as `migrations/0001_seawall_idempotency.sql` and
//! `migrations/0002_seawall_idempotency_owner.sql` ([`MIGRATIONS`]); [`PostgresStore::migrate`]
//! applies them in order, idempotently. A row in flight carries its request's
//! [`Owner`]: `complete`, `release` and `abandon` match on it, so a request cut at any point
//! settles its own row and never an identical concurrent request's. `begin` is a single `INSERT … ON CONFLICT DO UPDATE … WHERE expired`,
//! so two replicas racing on one key cannot both get [`Begin::Execute`]; all times come from the
//! database's `now()`, so replicas' clocks never disagree about a lease.

use std::time::Duration;

use bytes::Bytes;
use deadpool_postgres::Pool;

use super::{Begin, BoxFuture, Found, IdempotencyStore, StoredResponse, decide};
use crate::server::idempotency::error::StoreError;
use crate::server::idempotency::key::{Fingerprint, Owner, StoreKey};

/// The migrations this crate ships, in the order [`PostgresStore::migrate`] applies them.
pub const MIGRATIONS: [&str; 2] = [
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/0001_seawall_idempotency.sql")),
    include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations/0002_seawall_idempotency_owner.sql"
    )),
];
/// The default table name.
pub const DEFAULT_TABLE: &str = "seawall_idempotency";

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(e))
}

/// Milliseconds as the `float8` the SQL multiplies an interval by (capped at ~31 years).
fn millis(d: Duration) -> f64 {
    d.as_millis().min(1_000_000_000_000) as f64
}

/// An idempotency store in PostgreSQL, through a `deadpool-postgres` pool.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: Pool,
    table: String,
    sql_begin: String,
    sql_select: String,
    sql_complete: String,
    sql_release: String,
    sql_abandon: String,
}

impl PostgresStore {
    /// A store on `pool` using [`DEFAULT_TABLE`].
    pub fn new(pool: Pool) -> Self {
        Self::with_table(pool, DEFAULT_TABLE).expect("the default table name is valid")
    }

    /// A store on `pool` using `table` (ASCII letters, digits and `_`, not starting with a digit,
    /// at most 48 bytes); `None` for any other name, which is never spliced into SQL.
    pub fn with_table(pool: Pool, table: &str) -> Option<Self> {
        let ok = !table.is_empty()
            && table.len() <= 48
            && !table.as_bytes()[0].is_ascii_digit()
            && table.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return None;
        }
        let t = table;
        Some(PostgresStore {
            pool,
            table: t.to_owned(),
            sql_begin: format!(
                "INSERT INTO {t} \
                   (scope, key, fingerprint, done, lease_until, expires_at, response, owner) \
                 VALUES ($1, $2, $3, FALSE, now() + $4::float8 * interval '1 millisecond', \
                         now() + $5::float8 * interval '1 millisecond', NULL, $6) \
                 ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, \
                   done = FALSE, lease_until = EXCLUDED.lease_until, \
                   expires_at = EXCLUDED.expires_at, response = NULL, owner = EXCLUDED.owner \
                 WHERE {t}.expires_at <= now() \
                 RETURNING 1"
            ),
            sql_select: format!(
                "SELECT fingerprint, done, lease_until <= now(), response FROM {t} \
                 WHERE scope = $1 AND key = $2 AND expires_at > now()"
            ),
            sql_complete: format!(
                "UPDATE {t} SET done = TRUE, response = $4, \
                   expires_at = now() + $5::float8 * interval '1 millisecond' \
                 WHERE scope = $1 AND key = $2 AND owner = $3 AND NOT done"
            ),
            sql_release: format!(
                "DELETE FROM {t} WHERE scope = $1 AND key = $2 AND owner = $3 AND NOT done"
            ),
            sql_abandon: format!(
                "UPDATE {t} SET lease_until = now() \
                 WHERE scope = $1 AND key = $2 AND owner = $3 AND NOT done"
            ),
        })
    }

    /// The table this store uses.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Applies the shipped [`MIGRATIONS`] in order (with this store's table name). Idempotent:
    /// every replica may run it at start-up. (Two `CREATE TABLE IF NOT EXISTS` racing can still
    /// collide in PostgreSQL's catalog; the loser retries once and then finds the table.)
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        for migration in MIGRATIONS {
            let sql = migration.replace(DEFAULT_TABLE, &self.table);
            if client.batch_execute(&sql).await.is_err() {
                client.batch_execute(&sql).await.map_err(backend)?;
            }
        }
        Ok(())
    }

    /// Deletes expired rows; returns how many. Run it now and then (rows are also reused).
    pub async fn purge_expired(&self) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let sql = format!("DELETE FROM {} WHERE expires_at <= now()", self.table);
        client.execute(sql.as_str(), &[]).await.map_err(backend)
    }

    async fn begin_impl(
        &self,
        key: &StoreKey,
        fp: &Fingerprint,
        owner: &Owner,
        lease: Duration,
        ttl: Duration,
    ) -> Result<Begin, StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let owner = owner.as_bytes().as_slice();
        let (lease, ttl) = (millis(lease), millis(ttl));
        // Two rounds: the row we failed to insert over may expire before we read it.
        for _ in 0..2 {
            let inserted = client
                .query_opt(
                    self.sql_begin.as_str(),
                    &[&key.scope, &key.key, &fp.as_slice(), &lease, &ttl, &owner],
                )
                .await
                .map_err(backend)?;
            if inserted.is_some() {
                return Ok(Begin::Execute);
            }
            let Some(row) = client
                .query_opt(self.sql_select.as_str(), &[&key.scope, &key.key])
                .await
                .map_err(backend)?
            else {
                continue;
            };
            let stored_fp: Vec<u8> = row.try_get(0).map_err(backend)?;
            let done: bool = row.try_get(1).map_err(backend)?;
            let found = if done {
                let bytes: Option<Vec<u8>> = row.try_get(3).map_err(backend)?;
                let bytes = bytes.ok_or(StoreError::Corrupt)?;
                super::Found::Done(StoredResponse::decode(Bytes::from(bytes))?)
            } else {
                Found::Pending { lease_expired: row.try_get(2).map_err(backend)? }
            };
            return Ok(decide(&stored_fp, fp, found));
        }
        Err(StoreError::Corrupt)
    }

    /// Runs a statement that takes only the key and the owner (`abandon`, `release`).
    async fn execute_keyed(
        &self,
        sql: &str,
        key: &StoreKey,
        owner: &Owner,
    ) -> Result<(), StoreError> {
        let client = self.pool.get().await.map_err(backend)?;
        let owner = owner.as_bytes().as_slice();
        client.execute(sql, &[&key.scope, &key.key, &owner]).await.map_err(backend)?;
        Ok(())
    }
}

impl IdempotencyStore for PostgresStore {
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        owner: &'a Owner,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        Box::pin(self.begin_impl(key, fp, owner, lease, ttl))
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(backend)?;
            let encoded = res.encode()?;
            let owner = owner.as_bytes().as_slice();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&key.scope, &key.key, &owner, &encoded.as_ref(), &millis(ttl)];
            client.execute(self.sql_complete.as_str(), &params).await.map_err(backend)?;
            Ok(())
        })
    }

    fn abandon<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.execute_keyed(&self.sql_abandon, key, owner))
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.execute_keyed(&self.sql_release, key, owner))
    }
}
