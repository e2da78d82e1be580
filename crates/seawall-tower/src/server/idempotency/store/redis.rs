//! [`RedisStore`]: one Redis shared by a fleet of replicas (feature `redis-store`).
//!
//! Each key is one Redis string: a state byte (`0` in flight, `1` done), the 32-byte fingerprint,
//! the lease end (16 hex digits of Unix milliseconds) and, once done, the encoded response. Every
//! operation is one Lua script, so it is atomic; lease times come from Redis's own `TIME`, so
//! replicas' clocks never disagree. Expiry is Redis's `PX`.

use std::time::Duration;

use bytes::Bytes;
use redis::Script;
use redis::aio::MultiplexedConnection;

use super::{Begin, BoxFuture, Found, IdempotencyStore, StoredResponse, decide};
use crate::server::idempotency::error::StoreError;
use crate::server::idempotency::key::{Fingerprint, StoreKey};

/// Default prefix of every Redis key the store writes.
pub const DEFAULT_PREFIX: &str = "seawall:idem:";

/// Per-command response timeout used by [`RedisStore::connect`]: 5 s. The redis crate's default
/// (500 ms) turns a busy moment into `503`s (the layer fails closed when the store does not
/// answer); 5 s still stays well inside the default request deadline.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

const BEGIN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], '0' .. ARGV[1] .. string.format('%016x', now + tonumber(ARGV[2])), 'PX', ARGV[3])
  return {0, '', now}
end
return {1, v, now}
";

const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == '0' and string.sub(v, 2, 33) == ARGV[1] then
  redis.call('SET', KEYS[1], '1' .. ARGV[1] .. string.rep('0', 16) .. ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
";

const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == '0' and string.sub(v, 2, 33) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

// Ends the lease of an in-flight key (outcome unknown from now), keeping its expiry.
const ABANDON: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == '0' and string.sub(v, 2, 33) == ARGV[1] then
  redis.call('SET', KEYS[1], '0' .. ARGV[1] .. string.rep('0', 16), 'KEEPTTL')
  return 1
end
return 0
";

fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend(Box::new(e))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 2).max(1)
}

/// An idempotency store in Redis, over one multiplexed connection.
#[derive(Clone)]
pub struct RedisStore {
    conn: MultiplexedConnection,
    prefix: String,
    begin: Script,
    complete: Script,
    release: Script,
    abandon: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379/`) with [`DEFAULT_PREFIX`] and a
    /// [`RESPONSE_TIMEOUT`] per command.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(backend)?;
        let cfg = redis::AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
        let conn =
            client.get_multiplexed_async_connection_with_config(&cfg).await.map_err(backend)?;
        Ok(Self::new(conn, DEFAULT_PREFIX))
    }

    /// A store on `conn` writing keys under `prefix`.
    pub fn new(conn: MultiplexedConnection, prefix: &str) -> Self {
        RedisStore {
            conn,
            prefix: prefix.to_owned(),
            begin: Script::new(BEGIN),
            complete: Script::new(COMPLETE),
            release: Script::new(RELEASE),
            abandon: Script::new(ABANDON),
        }
    }

    fn redis_key(&self, key: &StoreKey) -> String {
        format!("{}{}:{}", self.prefix, key.scope, key.key)
    }

    /// Runs a script that takes only the key and the fingerprint (`abandon`, `release`).
    async fn run_keyed(
        &self,
        script: &Script,
        key: &StoreKey,
        fp: &Fingerprint,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let _: i64 = script
            .key(self.redis_key(key))
            .arg(fp.as_slice())
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn begin_impl(
        &self,
        key: &StoreKey,
        fp: &Fingerprint,
        lease: Duration,
        ttl: Duration,
    ) -> Result<Begin, StoreError> {
        let mut conn = self.conn.clone();
        let (code, value, now): (i64, Vec<u8>, i64) = self
            .begin
            .key(self.redis_key(key))
            .arg(fp.as_slice())
            .arg(millis(lease))
            .arg(millis(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        if code == 0 {
            return Ok(Begin::Execute);
        }
        if value.len() < 49 {
            return Err(StoreError::Corrupt);
        }
        let stored_fp = &value[1..33];
        let found = match value[0] {
            b'0' => {
                let hex = std::str::from_utf8(&value[33..49]).map_err(|_| StoreError::Corrupt)?;
                let lease_until = i64::from_str_radix(hex, 16).map_err(|_| StoreError::Corrupt)?;
                Found::Pending { lease_expired: now >= lease_until }
            }
            b'1' => Found::Done(StoredResponse::decode(Bytes::copy_from_slice(&value[49..]))?),
            _ => return Err(StoreError::Corrupt),
        };
        Ok(decide(stored_fp, fp, found))
    }
}

impl IdempotencyStore for RedisStore {
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        Box::pin(self.begin_impl(key, fp, lease, ttl))
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let _: i64 = self
                .complete
                .key(self.redis_key(key))
                .arg(fp.as_slice())
                .arg(res.encode().as_ref())
                .arg(millis(ttl))
                .invoke_async(&mut conn)
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn abandon<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run_keyed(&self.abandon, key, fp))
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run_keyed(&self.release, key, fp))
    }
}
