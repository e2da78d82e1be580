//! [`IdempotencyMetrics`]: what the idempotency layer did, and every way it refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one [`IdempotencyLayer`](super::IdempotencyLayer) (cheap to clone; share one
/// between layers to aggregate). Read with [`snapshot`](Self::snapshot).
#[derive(Debug, Clone, Default)]
pub struct IdempotencyMetrics(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    executed: AtomicU64,
    replayed: AtomicU64,
    conflicts: AtomicU64,
    mismatches: AtomicU64,
    principal_missing: AtomicU64,
    body_too_large: AtomicU64,
    body_timeouts: AtomicU64,
    store_unavailable: AtomicU64,
    store_timeouts: AtomicU64,
    capacity_refused: AtomicU64,
    pending_refused: AtomicU64,
    scope_refused: AtomicU64,
    released_cancelled: AtomicU64,
    abandoned: AtomicU64,
}

/// A point-in-time copy of [`IdempotencyMetrics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IdempotencySnapshot {
    /// Keyed requests whose handler was called.
    pub executed: u64,
    /// Stored responses replayed.
    pub replayed: u64,
    /// `409`s: in progress, or outcome unknown.
    pub conflicts: u64,
    /// `422`s: the key was used with another payload (in the same scope).
    pub mismatches: u64,
    /// `401`s: a keyed request without a principal.
    pub principal_missing: u64,
    /// `413`s, from `Content-Length` or while reading.
    pub body_too_large: u64,
    /// `408`s: the body did not arrive within the body timeout.
    pub body_timeouts: u64,
    /// `503`s because the store failed or timed out (the handler did not run).
    pub store_unavailable: u64,
    /// Store calls (of any kind) that hit the store timeout.
    pub store_timeouts: u64,
    /// `503`s because the store's records pool was full (new keys refused, nothing evicted).
    pub capacity_refused: u64,
    /// `503`s because the store's pending pool (keys in flight) was full.
    pub pending_refused: u64,
    /// `429`s because the principal held its share of the store, or its bound of
    /// outcome-unknown records (new keys of that principal refused; others unaffected).
    pub scope_refused: u64,
    /// Keys released because their request was cancelled before the handler was called.
    pub released_cancelled: u64,
    /// Keys marked outcome unknown because their request was cancelled after the handler was
    /// called.
    pub abandoned: u64,
}

/// Which counter to bump.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    Executed,
    Replayed,
    Conflict,
    Mismatch,
    PrincipalMissing,
    BodyTooLarge,
    BodyTimeout,
    StoreUnavailable,
    StoreTimeout,
    CapacityRefused,
    PendingRefused,
    ScopeRefused,
    ReleasedCancelled,
    Abandoned,
}

impl IdempotencyMetrics {
    /// Fresh counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn count(&self, e: Event) {
        let c = &self.0;
        let a = match e {
            Event::Executed => &c.executed,
            Event::Replayed => &c.replayed,
            Event::Conflict => &c.conflicts,
            Event::Mismatch => &c.mismatches,
            Event::PrincipalMissing => &c.principal_missing,
            Event::BodyTooLarge => &c.body_too_large,
            Event::BodyTimeout => &c.body_timeouts,
            Event::StoreUnavailable => &c.store_unavailable,
            Event::StoreTimeout => &c.store_timeouts,
            Event::CapacityRefused => &c.capacity_refused,
            Event::PendingRefused => &c.pending_refused,
            Event::ScopeRefused => &c.scope_refused,
            Event::ReleasedCancelled => &c.released_cancelled,
            Event::Abandoned => &c.abandoned,
        };
        a.fetch_add(1, Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> IdempotencySnapshot {
        let c = &self.0;
        let g = |a: &AtomicU64| a.load(Relaxed);
        IdempotencySnapshot {
            executed: g(&c.executed),
            replayed: g(&c.replayed),
            conflicts: g(&c.conflicts),
            mismatches: g(&c.mismatches),
            principal_missing: g(&c.principal_missing),
            body_too_large: g(&c.body_too_large),
            body_timeouts: g(&c.body_timeouts),
            store_unavailable: g(&c.store_unavailable),
            store_timeouts: g(&c.store_timeouts),
            capacity_refused: g(&c.capacity_refused),
            pending_refused: g(&c.pending_refused),
            scope_refused: g(&c.scope_refused),
            released_cancelled: g(&c.released_cancelled),
            abandoned: g(&c.abandoned),
        }
    }
}
