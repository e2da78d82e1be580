//! [`MemoryStore`]: the default store, bounded, for a single replica.
//!
//! # Two pools, and why it never evicts
//!
//! Keys in flight and finished keys live in separate, separately bounded pools:
//!
//! - **pending** ([`DEFAULT_MAX_PENDING`]): keys whose handler is running. The layer frees a slot
//!   the moment its request finishes, fails or is cancelled, so a burst of timeouts cannot hold
//!   the pool for a whole lease.
//! - **records** ([`DEFAULT_CAPACITY`]): finished keys (a stored response) and keys whose outcome
//!   is unknown (the handler started and the request was cancelled, or the process lost the
//!   response). They are kept for the TTL.
//!
//! When a pool is full, expired records are dropped; if it is still full, a new key is
//! **refused** ([`StoreError::Full`] / [`StoreError::PendingFull`], answered `503` with a
//! jittered `Retry-After`). Nothing unexpired is ever evicted: evicting a finished key would let
//! its retry execute a second time, silently ending exactly-once at the capacity. Repeats of keys
//! already stored are still answered while full. [`MemoryStore::stats`] shows both pools; the
//! layer counts refusals in [`IdempotencyMetrics`](super::super::IdempotencyMetrics).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use seawall::time::{Clock, Instant, SystemClock};

use super::{Begin, BoxFuture, Found, IdempotencyStore, StoredResponse, decide};
use crate::server::idempotency::error::StoreError;
use crate::server::idempotency::key::{Fingerprint, StoreKey};

/// Default capacity of the records pool: 10,000 keys (a local choice: at 1 KiB per stored
/// response, ~10 MiB; at most `capacity × max_body` in the worst case).
pub const DEFAULT_CAPACITY: usize = 10_000;
/// Default capacity of the pending pool: 1,024 keys in flight at once (a local choice: well
/// above the in-flight cap a `ShedLayer` would give one replica).
pub const DEFAULT_MAX_PENDING: usize = 1_024;

#[derive(Debug)]
enum State {
    Pending { lease_until: Instant },
    Unknown,
    Done(StoredResponse),
}

#[derive(Debug)]
struct Entry {
    fp: Fingerprint,
    state: State,
    expires: Instant,
}

#[derive(Debug, Default)]
struct Map {
    entries: HashMap<StoreKey, Entry>,
    pending: usize,
}

impl Map {
    fn records(&self) -> usize {
        self.entries.len() - self.pending
    }

    fn remove(&mut self, key: &StoreKey) {
        if let Some(Entry { state: State::Pending { .. }, .. }) = self.entries.remove(key) {
            self.pending -= 1;
        }
    }

    fn purge(&mut self, now: Instant) {
        self.entries.retain(|_, e| e.expires > now);
        self.pending =
            self.entries.values().filter(|e| matches!(e.state, State::Pending { .. })).count();
    }
}

/// How full a [`MemoryStore`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    /// Keys in flight (the pending pool).
    pub pending: usize,
    /// Finished and outcome-unknown keys (the records pool).
    pub records: usize,
}

/// An in-process store with a bounded pending pool and a bounded records pool (see the
/// [module docs](self)): full pools refuse new keys, never evict.
///
/// Only correct for one replica: replicas that must agree share a PostgreSQL or Redis store.
#[derive(Debug)]
pub struct MemoryStore<C = SystemClock> {
    map: Mutex<Map>,
    capacity: usize,
    max_pending: usize,
    clock: C,
}

impl MemoryStore<SystemClock> {
    /// A store of [`DEFAULT_CAPACITY`] records and [`DEFAULT_MAX_PENDING`] pending keys.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A store of at most `capacity` records (at least one).
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
    /// A store of `capacity` records driven by `clock` (tests: a `ManualClock`).
    pub fn with_clock(capacity: usize, clock: C) -> Self {
        MemoryStore {
            map: Mutex::new(Map::default()),
            capacity: capacity.max(1),
            max_pending: DEFAULT_MAX_PENDING,
            clock,
        }
    }

    /// At most `n` keys in flight at once (at least one; default [`DEFAULT_MAX_PENDING`]).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n.max(1);
        self
    }

    /// How full the two pools are now.
    pub fn stats(&self) -> MemoryStats {
        let m = self.lock();
        MemoryStats { pending: m.pending, records: m.records() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn begin_now(
        &self,
        key: &StoreKey,
        fp: &Fingerprint,
        lease: Duration,
        ttl: Duration,
    ) -> Result<Begin, StoreError> {
        let now = self.clock.now();
        let mut m = self.lock();
        if let Some(e) = m.entries.get(key).filter(|e| e.expires > now) {
            let found = match &e.state {
                State::Pending { lease_until } => {
                    Found::Pending { lease_expired: now >= *lease_until }
                }
                State::Unknown => Found::Pending { lease_expired: true },
                State::Done(r) => Found::Done(r.clone()),
            };
            return Ok(decide(&e.fp, fp, found));
        }
        m.remove(key);
        if m.pending >= self.max_pending || m.records() >= self.capacity {
            m.purge(now);
        }
        if m.pending >= self.max_pending {
            return Err(StoreError::PendingFull);
        }
        // A pending key becomes a record when it finishes: refuse it now rather than later.
        if m.records() + m.pending >= self.capacity {
            return Err(StoreError::Full);
        }
        m.pending += 1;
        let entry = Entry {
            fp: *fp,
            state: State::Pending { lease_until: now + lease },
            expires: now + ttl,
        };
        m.entries.insert(key.clone(), entry);
        Ok(Begin::Execute)
    }

    /// Moves a pending key to `state` (a record) if it is still pending with `fp`.
    fn settle(&self, key: &StoreKey, fp: &Fingerprint, state: State, ttl: Option<Duration>) {
        let now = self.clock.now();
        let mut m = self.lock();
        let Some(e) = m.entries.get_mut(key) else { return };
        if e.fp != *fp || !matches!(e.state, State::Pending { .. }) {
            return;
        }
        e.state = state;
        if let Some(ttl) = ttl {
            e.expires = now + ttl;
        }
        m.pending -= 1;
    }
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

impl<C: Clock + 'static> IdempotencyStore for MemoryStore<C> {
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        ready(self.begin_now(key, fp, lease, ttl))
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.settle(key, fp, State::Done(res.clone()), Some(ttl));
        ready(Ok(()))
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut m = self.lock();
        if m.entries
            .get(key)
            .is_some_and(|e| e.fp == *fp && matches!(e.state, State::Pending { .. }))
        {
            m.remove(key);
        }
        ready(Ok(()))
    }

    fn abandon<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.settle(key, fp, State::Unknown, None);
        ready(Ok(()))
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
