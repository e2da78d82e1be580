//! [`MemoryStore`]: the default store, bounded, for a single replica.
//!
//! # Pools, shares, and why it never evicts
//!
//! - **pending** ([`DEFAULT_MAX_PENDING`]): keys whose handler is running. The layer frees a slot
//!   the moment its request finishes, fails or is cancelled.
//! - **records** ([`DEFAULT_CAPACITY`], pending keys included): finished keys (a stored response)
//!   and keys whose outcome is unknown (the handler started and the request was cancelled). They
//!   are kept for the TTL.
//! - **the reserve** (the last [`DEFAULT_SCOPE_SHARE`] of the records): once the store is that
//!   full, a principal (a scope, see [`scope`](crate::server::idempotency::scope)) that holds a
//!   share itself, or [`DEFAULT_SCOPE_UNKNOWN`] outcome-unknown records, gets no new keys until
//!   its records expire; principals under both bounds still do. So one client cannot fill the
//!   store for everyone, while a store with room refuses nobody (a single-tenant service can use
//!   all but the reserve; [`scope_share(1.0)`](MemoryStore::scope_share) gives it all).
//!   Requests cut after their handler started are the cheap way to fill a store (each costs
//!   the client one short timeout and the store a record for the whole TTL), so their records
//!   are bounded apart from finished ones.
//!
//! A new key over a bound is **refused**, never stored by evicting another: evicting a finished
//! key would let its retry execute a second time, silently ending exactly-once at the capacity.
//! Repeats of keys already stored are answered whatever the bounds. The refusals, and what the
//! layer answers:
//!
//! | bound | error | answer |
//! |---|---|---|
//! | pending pool | [`StoreError::PendingFull`] | `503`, jittered `Retry-After` (keys in flight finish within their deadlines) |
//! | records | [`StoreError::Full`] | `503`, `Retry-After` = when the store's oldest record expires |
//! | in the reserve: a principal's share or unknown outcomes | [`StoreError::ScopeFull`] | `429`, `Retry-After` = when that principal's oldest (unknown) record expires |
//!
//! Every check is a counter and the first entry of an ordered index: a refusal costs
//! `O(log n)` with no scan, and expired records are dropped oldest first as new keys arrive.
//!
//! # The sustained rate a store can take
//!
//! A record lives for the TTL whatever happens to it, so new keys can be accepted, on average, at
//! no more than **capacity ÷ TTL** per replica, and one principal at no more than
//! **share ÷ TTL** once the store reaches its reserve: with the defaults (10,000 records, a
//! quarter, 24 h) that is 417 new keys per hour per replica (0.12 /s), and 104 per hour for a
//! principal in a full store. A service taking
//! more keyed writes must raise the capacity (about 1 KiB per typical record; at most
//! `capacity × max_body`), shorten the TTL to how long its clients really retry, or use the
//! PostgreSQL or Redis store, which are bounded by their own storage (rows or keys × record
//! size) rather than by a count.
//!
//! [`MemoryStore::stats`] shows the pools; the layer counts refusals in
//! [`IdempotencyMetrics`](super::super::IdempotencyMetrics).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use seawall::time::{Clock, Instant, SystemClock};

use super::{Begin, BoxFuture, Found, IdempotencyStore, StoredResponse, decide};
use crate::server::idempotency::error::StoreError;
use crate::server::idempotency::key::{Fingerprint, Owner, StoreKey};

/// Default capacity of the records pool, pending keys included: 10,000 keys (a local choice: at
/// 1 KiB per stored response, ~10 MiB; at most `capacity × max_body` in the worst case).
pub const DEFAULT_CAPACITY: usize = 10_000;
/// Default capacity of the pending pool: 1,024 keys in flight at once (a local choice: well
/// above the in-flight cap a `ShedLayer` would give one replica).
pub const DEFAULT_MAX_PENDING: usize = 1_024;
/// Default share: the last quarter of the records is a reserve that a principal holding a
/// quarter itself cannot take (a local choice: one principal can never fill the store, and
/// until the store is three-quarters full it refuses nobody).
pub const DEFAULT_SCOPE_SHARE: f64 = 0.25;
/// Default number of outcome-unknown records past which a principal gets no new keys from the
/// reserve: 100 (a local choice: far more than honest clients leave behind — each is a request
/// cut after its handler started — and a hundredth of the default capacity).
pub const DEFAULT_SCOPE_UNKNOWN: usize = 100;

#[derive(Debug)]
enum State {
    Pending { lease_until: Instant, owner: Owner },
    Unknown,
    Done(StoredResponse),
}

#[derive(Debug)]
struct Entry {
    fp: Fingerprint,
    state: State,
    expires: Instant,
    /// This entry's number, which makes its place in the expiry indexes unique.
    id: u64,
}

impl Entry {
    fn pending_for(&self, owner: &Owner) -> bool {
        matches!(&self.state, State::Pending { owner: o, .. } if o == owner)
    }

    fn at(&self) -> (Instant, u64) {
        (self.expires, self.id)
    }
}

/// What one scope holds.
#[derive(Debug, Default)]
struct Scope {
    pending: usize,
    /// Expiries of its finished records.
    done: BTreeSet<(Instant, u64)>,
    /// Expiries of its outcome-unknown records.
    unknown: BTreeSet<(Instant, u64)>,
}

impl Scope {
    fn held(&self) -> usize {
        self.pending + self.done.len() + self.unknown.len()
    }

    /// The set a settled entry's expiry lives in (`None` while pending).
    fn index(&mut self, state: &State) -> Option<&mut BTreeSet<(Instant, u64)>> {
        match state {
            State::Pending { .. } => None,
            State::Unknown => Some(&mut self.unknown),
            State::Done(_) => Some(&mut self.done),
        }
    }
}

#[derive(Debug, Default)]
struct Map {
    entries: HashMap<StoreKey, Entry>,
    /// Every entry by expiry, oldest first.
    by_expiry: BTreeMap<(Instant, u64), StoreKey>,
    scopes: HashMap<String, Scope>,
    pending: usize,
    next_id: u64,
}

impl Map {
    fn records(&self) -> usize {
        self.entries.len() - self.pending
    }

    fn unknown(&self) -> usize {
        self.scopes.values().map(|s| s.unknown.len()).sum()
    }

    fn remove(&mut self, key: &StoreKey) {
        let Some(e) = self.entries.remove(key) else { return };
        self.by_expiry.remove(&e.at());
        let Some(scope) = self.scopes.get_mut(&key.scope) else { return };
        match scope.index(&e.state) {
            Some(set) => drop(set.remove(&e.at())),
            None => {
                scope.pending -= 1;
                self.pending -= 1;
            }
        }
        if scope.held() == 0 {
            self.scopes.remove(&key.scope);
        }
    }

    /// Drops every entry expired by `now`, oldest first.
    fn purge(&mut self, now: Instant) {
        while let Some(entry) = self.by_expiry.first_entry() {
            if entry.key().0 > now {
                return;
            }
            let key = entry.remove();
            self.remove(&key);
        }
    }

    fn insert(&mut self, key: StoreKey, fp: Fingerprint, state: State, expires: Instant) {
        let id = self.next_id;
        self.next_id += 1;
        let scope = self.scopes.entry(key.scope.clone()).or_default();
        match scope.index(&state) {
            Some(set) => drop(set.insert((expires, id))),
            None => {
                scope.pending += 1;
                self.pending += 1;
            }
        }
        self.by_expiry.insert((expires, id), key.clone());
        self.entries.insert(key, Entry { fp, state, expires, id });
    }

    /// Moves `owner`'s pending `key` to `state`, expiring at `expires` (or as before).
    fn settle(&mut self, key: &StoreKey, owner: &Owner, state: State, expires: Option<Instant>) {
        let Some(e) = self.entries.get(key).filter(|e| e.pending_for(owner)) else { return };
        let fp = e.fp;
        let expires = expires.unwrap_or(e.expires);
        self.remove(key);
        self.insert(key.clone(), fp, state, expires);
    }
}

/// When the oldest of `set` frees, from `now`.
fn frees_in(set: impl IntoIterator<Item = Instant>, now: Instant) -> Option<Duration> {
    set.into_iter().min().map(|at| at - now)
}

/// How full a [`MemoryStore`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Keys in flight (the pending pool).
    pub pending: usize,
    /// Finished and outcome-unknown keys (the records pool).
    pub records: usize,
    /// Of the records, those whose outcome is unknown.
    pub unknown: usize,
    /// Principals (scopes) holding at least one key.
    pub scopes: usize,
}

/// An in-process store with bounded pools and per-principal shares (see the
/// [module docs](self)): over a bound it refuses new keys, never evicts.
///
/// Only correct for one replica: replicas that must agree share a PostgreSQL or Redis store.
#[derive(Debug)]
pub struct MemoryStore<C = SystemClock> {
    map: Mutex<Map>,
    capacity: usize,
    max_pending: usize,
    scope_share: usize,
    scope_unknown: usize,
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
    /// A store of `capacity` records driven by `clock` (tests: a `ManualClock`), a principal's
    /// share [`DEFAULT_SCOPE_SHARE`] of it (at least one record).
    pub fn with_clock(capacity: usize, clock: C) -> Self {
        let capacity = capacity.max(1);
        MemoryStore {
            map: Mutex::new(Map::default()),
            capacity,
            max_pending: DEFAULT_MAX_PENDING,
            scope_share: share_of(capacity, DEFAULT_SCOPE_SHARE),
            scope_unknown: DEFAULT_SCOPE_UNKNOWN,
            clock,
        }
    }

    /// At most `n` keys in flight at once (at least one; default [`DEFAULT_MAX_PENDING`]).
    pub fn max_pending(mut self, n: usize) -> Self {
        self.max_pending = n.max(1);
        self
    }

    /// The reserve and a principal's share, as a fraction of the capacity (clamped to `0..=1`,
    /// at least one record; default [`DEFAULT_SCOPE_SHARE`]). `1.0` turns shares off (one
    /// principal may fill the store, e.g. a service with a single trusted caller).
    pub fn scope_share(mut self, fraction: f64) -> Self {
        self.scope_share = share_of(self.capacity, fraction);
        self
    }

    /// A principal holding `n` outcome-unknown records gets no new keys from the reserve (at
    /// least one; default [`DEFAULT_SCOPE_UNKNOWN`]).
    pub fn scope_unknown(mut self, n: usize) -> Self {
        self.scope_unknown = n.max(1);
        self
    }

    /// How full the pools are now.
    pub fn stats(&self) -> MemoryStats {
        let m = self.lock();
        MemoryStats {
            pending: m.pending,
            records: m.records(),
            unknown: m.unknown(),
            scopes: m.scopes.len(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn begin_now(
        &self,
        key: &StoreKey,
        fp: &Fingerprint,
        owner: Owner,
        lease: Duration,
        ttl: Duration,
    ) -> Result<Begin, StoreError> {
        let now = self.clock.now();
        let mut m = self.lock();
        m.purge(now);
        if let Some(e) = m.entries.get(key) {
            let found = match &e.state {
                State::Pending { lease_until, .. } => {
                    Found::Pending { lease_expired: now >= *lease_until }
                }
                State::Unknown => Found::Pending { lease_expired: true },
                State::Done(r) => Found::Done(r.clone()),
            };
            return Ok(decide(&e.fp, fp, found));
        }
        if m.pending >= self.max_pending {
            return Err(StoreError::PendingFull);
        }
        // The last `share` of the store is kept for principals under their bounds: a share of
        // the whole capacity is no share (the store's own bound answers).
        let contended = self.capacity - m.entries.len() <= self.scope_share;
        if let Some(scope) = m.scopes.get(&key.scope).filter(|_| contended) {
            let firsts = |s: &BTreeSet<(Instant, u64)>| s.first().map(|f| f.0);
            if scope.unknown.len() >= self.scope_unknown {
                let frees_in = frees_in(firsts(&scope.unknown), now);
                return Err(StoreError::ScopeFull { frees_in });
            }
            if self.scope_share < self.capacity && scope.held() >= self.scope_share {
                let frees_in =
                    frees_in(firsts(&scope.done).into_iter().chain(firsts(&scope.unknown)), now);
                return Err(StoreError::ScopeFull { frees_in });
            }
        }
        // A pending key becomes a record when it finishes: it counts against the capacity now.
        if m.entries.len() >= self.capacity {
            let frees_in = frees_in(m.by_expiry.first_key_value().map(|(k, _)| k.0), now);
            return Err(StoreError::Full { frees_in });
        }
        let state = State::Pending { lease_until: now + lease, owner };
        m.insert(key.clone(), *fp, state, now + ttl);
        Ok(Begin::Execute)
    }

    /// Moves `owner`'s pending key to `state` (a record); `ttl` from now, or the expiry kept.
    fn settle(&self, key: &StoreKey, owner: &Owner, state: State, ttl: Option<Duration>) {
        let now = self.clock.now();
        self.lock().settle(key, owner, state, ttl.map(|t| now + t));
    }
}

/// `fraction` of `capacity` records, at least one.
fn share_of(capacity: usize, fraction: f64) -> usize {
    let f = if fraction.is_nan() { 1.0 } else { fraction.clamp(0.0, 1.0) };
    ((capacity as f64 * f).ceil() as usize).clamp(1, capacity)
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

impl<C: Clock + 'static> IdempotencyStore for MemoryStore<C> {
    fn begin<'a>(
        &'a self,
        key: &'a StoreKey,
        fp: &'a Fingerprint,
        owner: &'a Owner,
        lease: Duration,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Begin, StoreError>> {
        ready(self.begin_now(key, fp, *owner, lease, ttl))
    }

    fn complete<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
        res: &'a StoredResponse,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.settle(key, owner, State::Done(res.clone()), Some(ttl));
        ready(Ok(()))
    }

    fn release<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut m = self.lock();
        if m.entries.get(key).is_some_and(|e| e.pending_for(owner)) {
            m.remove(key);
        }
        ready(Ok(()))
    }

    fn abandon<'a>(
        &'a self,
        key: &'a StoreKey,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.settle(key, owner, State::Unknown, None);
        ready(Ok(()))
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
