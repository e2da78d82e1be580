//! [`RedisStore`]: one Redis shared by a fleet of replicas (feature `redis-store`).
//!
//! Each key is one Redis string: a state byte (`P` in flight, `D` done), the 32-byte fingerprint,
//! the 16-byte [`Owner`] of the request that began it, the lease end (16 hex digits of Unix
//! milliseconds) and, once done, the encoded response. `complete`, `release` and `abandon` act
//! only on a marker in flight for their owner. Every
//! operation is one Lua script, so it is atomic; lease times come from Redis's own `TIME`, so
//! replicas' clocks never disagree. Expiry is Redis's `PX`.
//!
//! # Redis restarts
//!
//! A multiplexed connection whose server went away stays broken. A store made by
//! [`RedisStore::connect`] or [`RedisStore::with_client`] keeps its `redis::Client` and, when a
//! call fails on a dropped connection, opens a new one (once, for every call that failed on the
//! same connection). The call that saw the failure still answers `503` (the layer fails closed),
//! and so does every call while Redis is down; the first call after Redis is back finds the new
//! connection (or opens it).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use redis::Script;
use redis::aio::MultiplexedConnection;

use super::{Begin, BoxFuture, Found, IdempotencyStore, StoredResponse, decide};
use crate::server::idempotency::error::StoreError;
use crate::server::idempotency::key::{Fingerprint, Owner, StoreKey};

/// Default prefix of every Redis key the store writes.
pub const DEFAULT_PREFIX: &str = "seawall:idem:";

/// Per-command response timeout used by [`RedisStore::connect`]: 5 s. The redis crate's default
/// (500 ms) turns a busy moment into `503`s (the layer fails closed when the store does not
/// answer); 5 s still stays well inside the default request deadline.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

// ARGV: fingerprint (32 bytes) .. owner (16 bytes), lease ms, ttl ms.
const BEGIN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'P' .. ARGV[1] .. string.format('%016x', now + tonumber(ARGV[2])), 'PX', ARGV[3])
  return {0, '', now}
end
return {1, v, now}
";

// The scripts below act only on a marker in flight ('P') for this owner (ARGV[1], bytes 34–49).
const COMPLETE: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'P' and string.sub(v, 34, 49) == ARGV[1] then
  redis.call('SET', KEYS[1], 'D' .. string.sub(v, 2, 49) .. string.rep('0', 16) .. ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
";

const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'P' and string.sub(v, 34, 49) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

// Ends the lease of an in-flight key (outcome unknown from now), keeping its expiry.
const ABANDON: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'P' and string.sub(v, 34, 49) == ARGV[1] then
  redis.call('SET', KEYS[1], string.sub(v, 1, 49) .. string.rep('0', 16), 'KEEPTTL')
  return 1
end
return 0
";

/// Where a value's fields are: the owner-less layout of earlier versions (`0` / `1`, kept
/// readable so their records are answered through an upgrade) and the current one (`P` / `D`).
fn layout(state: u8) -> Option<(bool, usize)> {
    match state {
        b'0' => Some((false, 33)),
        b'1' => Some((true, 33)),
        b'P' => Some((false, 49)),
        b'D' => Some((true, 49)),
        _ => None,
    }
}

fn backend(e: redis::RedisError) -> StoreError {
    StoreError::Backend(Box::new(e))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 2).max(1)
}

/// The store's connection, replaced when it breaks (see the module docs).
struct Link {
    /// `None` for a store made from a bare connection ([`RedisStore::new`]): it never reconnects.
    client: Option<redis::Client>,
    /// The current connection and its generation (how many times it was replaced).
    current: Mutex<(u64, MultiplexedConnection)>,
    /// Held while reconnecting, so the calls that failed together open one new connection.
    reconnecting: tokio::sync::Mutex<()>,
}

impl Link {
    fn get(&self) -> (u64, MultiplexedConnection) {
        let g = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (g.0, g.1.clone())
    }

    /// After `e` on connection `generation`: a new connection if `e` means the old one is gone
    /// and nobody replaced it yet. Errors here are dropped: the caller already fails with `e`.
    async fn recover(&self, generation: u64, e: &redis::RedisError) {
        let Some(client) = &self.client else { return };
        if !(e.is_unrecoverable_error() || e.is_io_error() || e.is_connection_dropped()) {
            return;
        }
        let _one = self.reconnecting.lock().await;
        if self.get().0 != generation {
            return; // another call reconnected already
        }
        if let Ok(conn) = client.get_multiplexed_async_connection_with_config(&config()).await {
            let mut g = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *g = (generation + 1, conn);
        }
    }
}

fn config() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT))
}

/// An idempotency store in Redis, over one multiplexed connection (replaced when it breaks, for
/// a store made with [`connect`](Self::connect) or [`with_client`](Self::with_client)).
#[derive(Clone)]
pub struct RedisStore {
    link: Arc<Link>,
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
    /// [`RESPONSE_TIMEOUT`] per command; reconnects after a Redis restart.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(backend)?;
        Self::with_client(client, DEFAULT_PREFIX).await
    }

    /// Connects through `client` (a [`RESPONSE_TIMEOUT`] per command), writing keys under
    /// `prefix`; reconnects through `client` after a Redis restart.
    pub async fn with_client(client: redis::Client, prefix: &str) -> Result<Self, StoreError> {
        let conn = client
            .get_multiplexed_async_connection_with_config(&config())
            .await
            .map_err(backend)?;
        Ok(Self::build(Some(client), conn, prefix))
    }

    /// A store on `conn` writing keys under `prefix`. It cannot reconnect (it has no client):
    /// once Redis restarts it answers `503` until replaced; prefer
    /// [`with_client`](Self::with_client).
    pub fn new(conn: MultiplexedConnection, prefix: &str) -> Self {
        Self::build(None, conn, prefix)
    }

    fn build(client: Option<redis::Client>, conn: MultiplexedConnection, prefix: &str) -> Self {
        let link = Link {
            client,
            current: Mutex::new((0, conn)),
            reconnecting: tokio::sync::Mutex::new(()),
        };
        RedisStore {
            link: Arc::new(link),
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

    /// Runs `invocation` on the current connection; on a broken connection, replaces it.
    async fn invoke<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let (generation, mut conn) = self.link.get();
        match invocation.invoke_async(&mut conn).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.link.recover(generation, &e).await;
                Err(backend(e))
            }
        }
    }

    /// Runs a script that takes only the key and the owner (`abandon`, `release`).
    async fn run_keyed(
        &self,
        script: &Script,
        key: &StoreKey,
        owner: &Owner,
    ) -> Result<(), StoreError> {
        let mut call = script.key(self.redis_key(key));
        call.arg(owner.as_bytes().as_slice());
        let _: i64 = self.invoke(call).await?;
        Ok(())
    }

    async fn begin_impl(
        &self,
        key: &StoreKey,
        fp: &Fingerprint,
        owner: &Owner,
        lease: Duration,
        ttl: Duration,
    ) -> Result<Begin, StoreError> {
        let mut call = self.begin.key(self.redis_key(key));
        let mut marker = [0u8; 48];
        marker[..32].copy_from_slice(fp);
        marker[32..].copy_from_slice(owner.as_bytes());
        call.arg(marker.as_slice()).arg(millis(lease)).arg(millis(ttl));
        let (code, value, now): (i64, Vec<u8>, i64) = self.invoke(call).await?;
        if code == 0 {
            return Ok(Begin::Execute);
        }
        // `found` checked the length: the fingerprint is bytes 1..33 in both layouts.
        let found = found(&value, now)?;
        Ok(decide(&value[1..33], fp, found))
    }
}

/// What a stored value says (either layout), `now` in Redis's Unix milliseconds.
fn found(value: &[u8], now: i64) -> Result<Found, StoreError> {
    let (done, lease_at) = value.first().and_then(|&s| layout(s)).ok_or(StoreError::Corrupt)?;
    let rest = value.get(lease_at + 16..).ok_or(StoreError::Corrupt)?;
    if done {
        return Ok(Found::Done(StoredResponse::decode(Bytes::copy_from_slice(rest))?));
    }
    let hex =
        std::str::from_utf8(&value[lease_at..lease_at + 16]).map_err(|_| StoreError::Corrupt)?;
    let lease_until = i64::from_str_radix(hex, 16).map_err(|_| StoreError::Corrupt)?;
    Ok(Found::Pending { lease_expired: now >= lease_until })
}

impl IdempotencyStore for RedisStore {
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
            let encoded = res.encode()?;
            let mut call = self.complete.key(self.redis_key(key));
            call.arg(owner.as_bytes().as_slice()).arg(encoded.as_ref()).arg(millis(ttl));
            let _: i64 = self.invoke(call).await?;
            Ok(())
        })
    }

    fn abandon<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run_keyed(&self.abandon, key, owner))
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.run_keyed(&self.release, key, owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any value read back under a key, whoever wrote it: a state or `Corrupt`, never a
        /// panic (the slicing after the layout check is what this guards).
        #[test]
        fn any_value_reads_as_a_state_or_corrupt(
            value in proptest::collection::vec(any::<u8>(), 0..120),
            state in proptest::sample::select(vec![b'0', b'1', b'P', b'D', b'x']),
            now in any::<i64>(),
        ) {
            let _ = found(&value, now);
            let mut v = value;
            v.insert(0, state);
            let _ = found(&v, now);
        }

        /// The values the scripts write (`BEGIN`'s pending record, `COMPLETE`'s finished one)
        /// read back as written; a truncated one is `Corrupt`.
        #[test]
        fn the_scripts_values_read_back(
            fp in "[0-9a-f]{32}",
            owner in "[0-9a-f]{16}",
            lease in 0i64..(1 << 52),
            now in 0i64..(1 << 52),
            status in 100u16..600,
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let pending = format!("P{fp}{owner}{lease:016x}");
            match found(pending.as_bytes(), now) {
                Ok(Found::Pending { lease_expired }) => prop_assert_eq!(lease_expired, now >= lease),
                other => prop_assert!(false, "{:?}", other),
            }
            prop_assert!(matches!(
                found(&pending.as_bytes()[..pending.len() - 1], now),
                Err(StoreError::Corrupt)
            ));
            let response = StoredResponse {
                status,
                headers: vec![("retry-after".into(), Bytes::from_static(b"3"))],
                body: Bytes::from(body),
            };
            let mut done = format!("D{fp}{owner}{}", "0".repeat(16)).into_bytes();
            done.extend_from_slice(&response.encode().unwrap());
            match found(&done, now) {
                Ok(Found::Done(r)) => prop_assert_eq!(r, response),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
