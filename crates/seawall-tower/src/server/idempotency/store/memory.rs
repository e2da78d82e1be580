//! [`MemoryStore`]: the default store, bounded, for a single replica.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use seawall::time::{Clock, Instant, SystemClock};

use super::{Begin, BoxFuture, Found, IdempotencyStore, StoredResponse, decide};
use crate::server::idempotency::error::StoreError;
use crate::server::idempotency::key::{Fingerprint, StoreKey};

/// Default capacity of [`MemoryStore`]: 10,000 keys (a local choice: at 1 KiB per stored response,
/// ~10 MiB).
pub const DEFAULT_CAPACITY: usize = 10_000;

#[derive(Debug)]
enum State {
    Pending { lease_until: Instant },
    Done(StoredResponse),
}

#[derive(Debug)]
struct Entry {
    fp: Fingerprint,
    state: State,
    expires: Instant,
    seq: u64,
}

#[derive(Debug, Default)]
struct Map {
    entries: HashMap<StoreKey, Entry>,
    seq: u64,
}

/// An in-process store holding at most `capacity` keys. When full it drops expired keys, then
/// the oldest *finished* ones; keys in flight are never evicted (evicting one would let a repeat
/// execute a second time), so a store full of in-flight keys refuses new ones
/// ([`StoreError::Full`], answered 503).
///
/// Only correct for one replica: replicas that must agree share a PostgreSQL or Redis store.
#[derive(Debug)]
pub struct MemoryStore<C = SystemClock> {
    map: Mutex<Map>,
    capacity: usize,
    clock: C,
}

impl MemoryStore<SystemClock> {
    /// A store of [`DEFAULT_CAPACITY`] keys.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A store of at most `capacity` keys (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        MemoryStore::with_clock(capacity, SystemClock)
    }
}

impl Default for MemoryStore<SystemClock> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> MemoryStore<C> {
    /// A store driven by `clock` (tests: a `ManualClock`).
    pub fn with_clock(capacity: usize, clock: C) -> Self {
        MemoryStore { map: Mutex::new(Map::default()), capacity: capacity.max(1), clock }
    }

    fn begin_now(
        &self,
        key: &StoreKey,
        fp: &Fingerprint,
        lease: Duration,
        ttl: Duration,
    ) -> Result<Begin, StoreError> {
        let now = self.clock.now();
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.entries.get(key).filter(|e| e.expires > now) {
            let found = match &e.state {
                State::Pending { lease_until } => {
                    Found::Pending { lease_expired: now >= *lease_until }
                }
                State::Done(r) => Found::Done(r.clone()),
            };
            return Ok(decide(&e.fp, fp, found));
        }
        if m.entries.len() >= self.capacity && !m.entries.contains_key(key) {
            m.entries.retain(|_, e| e.expires > now);
            if m.entries.len() >= self.capacity {
                let oldest = m
                    .entries
                    .iter()
                    .filter(|(_, e)| matches!(e.state, State::Done(_)))
                    .min_by_key(|(_, e)| e.seq)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => {
                        m.entries.remove(&k);
                    }
                    None => return Err(StoreError::Full),
                }
            }
        }
        m.seq += 1;
        let seq = m.seq;
        let entry = Entry {
            fp: *fp,
            state: State::Pending { lease_until: now + lease },
            expires: now + ttl,
            seq,
        };
        m.entries.insert(key.clone(), entry);
        Ok(Begin::Execute)
    }
}

impl<C: Clock + 'static> IdempotencyStore for MemoryStore<C> {
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        let r = self.begin_now(key, fp, lease, ttl);
        Box::pin(async move { r })
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let now = self.clock.now();
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = m.entries.get_mut(key).filter(|e| e.fp == *fp) {
            e.state = State::Done(res.clone());
            e.expires = now + ttl;
        }
        Box::pin(async { Ok(()) })
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if m.entries
            .get(key)
            .is_some_and(|e| e.fp == *fp && matches!(e.state, State::Pending { .. }))
        {
            m.entries.remove(key);
        }
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use seawall::time::ManualClock;

    const S: Duration = Duration::from_secs(1);

    fn key(k: &str) -> StoreKey {
        StoreKey { scope: "s".into(), key: k.into() }
    }

    fn now<F: std::future::Future>(f: F) -> F::Output {
        // Every MemoryStore future is ready at once.
        let waker = std::task::Waker::noop();
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => unreachable!("memory store futures are ready"),
        }
    }

    #[test]
    fn lifecycle_and_crash_guarantee_on_virtual_time() {
        let clock = ManualClock::new();
        let s = MemoryStore::with_clock(10, clock.clone());
        let (fp, other) = ([1; 32], [2; 32]);
        assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
        assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::InFlight);
        assert_eq!(now(s.begin(&key("a"), &other, S, 60 * S)).unwrap(), Begin::Mismatch);
        // "Crash": never completed. After the lease: outcome unknown, never a second execution.
        clock.advance(2 * S);
        assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Unknown);
        // After the TTL the key is free again.
        clock.advance(60 * S);
        assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
        let r = StoredResponse { status: 201, headers: vec![], body: Bytes::from_static(b"ok") };
        now(s.complete(&key("a"), &fp, &r, 60 * S)).unwrap();
        assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Done(r));
    }

    #[test]
    fn bounded_evicts_finished_never_in_flight() {
        let clock = ManualClock::new();
        let s = MemoryStore::with_clock(2, clock.clone());
        let fp = [1; 32];
        let r = StoredResponse { status: 200, headers: vec![], body: Bytes::new() };
        assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
        now(s.complete(&key("a"), &fp, &r, 60 * S)).unwrap();
        assert_eq!(now(s.begin(&key("b"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
        assert_eq!(
            now(s.begin(&key("c"), &fp, S, 60 * S)).unwrap(),
            Begin::Execute,
            "evicts finished a"
        );
        assert!(matches!(now(s.begin(&key("d"), &fp, S, 60 * S)), Err(StoreError::Full)));
        now(s.release(&key("b"), &fp)).unwrap();
        assert_eq!(now(s.begin(&key("b"), &fp, S, 60 * S)).unwrap(), Begin::Execute, "released");
    }
}
