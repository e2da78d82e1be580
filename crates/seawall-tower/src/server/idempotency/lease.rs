//! [`Lease`]: what happens to a key whose request is cancelled mid-way.
//!
//! A request future can be dropped at any await: by an outer `DeadlineLayer`, by hyper when the
//! client disconnects, by a `tokio::time::timeout`. A key this request began must then not sit
//! "in progress" for a whole lease (holding the store's pending pool and answering repeats
//! `409 in progress` for work nobody is doing). The guard, armed once the store said
//! [`Execute`](super::Begin::Execute), settles the key when dropped armed:
//!
//! - handler **not called** yet: the key is released, so a retry executes (nothing ran);
//! - handler **called**: the key becomes *outcome unknown* at once
//!   ([`IdempotencyStore::abandon`]); it is never executed again within the TTL, because the
//!   handler may have had effects before it was cancelled.

use std::future::Future;
use std::sync::Arc;

use super::key::{Fingerprint, StoreKey};
use super::layer::Config;
use super::metrics::Event;
use super::store::IdempotencyStore;

pub(super) struct Lease {
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
    key: StoreKey,
    fp: Fingerprint,
    started: bool,
    armed: bool,
}

impl Lease {
    pub(super) fn new(
        store: Arc<dyn IdempotencyStore>,
        cfg: Arc<Config>,
        key: StoreKey,
        fp: Fingerprint,
    ) -> Self {
        Lease { store, cfg, key, fp, started: false, armed: true }
    }

    pub(super) fn key(&self) -> (&StoreKey, &Fingerprint) {
        (&self.key, &self.fp)
    }

    /// The handler is about to be called: from now on a cancellation means "outcome unknown".
    pub(super) fn start(&mut self) {
        self.started = true;
    }

    /// The request reached an outcome the flow records itself: nothing to do on drop.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (store, cfg) = (self.store.clone(), self.cfg.clone());
        let (key, fp, started) = (self.key.clone(), self.fp, self.started);
        cfg.metrics.count(if started { Event::Abandoned } else { Event::ReleasedCancelled });
        let settle = async move {
            let call = if started { store.abandon(&key, &fp) } else { store.release(&key, &fp) };
            match tokio::runtime::Handle::try_current() {
                // Bounded like every store call; a failure leaves the marker to its lease (safe).
                Ok(_) => drop(tokio::time::timeout(cfg.store_timeout, call).await),
                Err(_) => drop(call.await),
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(settle)),
            Err(_) => poll_once(settle),
        }
    }
}

/// Outside a runtime (no timer either): one poll, which settles the in-memory store (its futures
/// are ready at once); other stores keep the marker until its lease runs out.
fn poll_once(f: impl Future<Output = ()>) {
    let f = std::pin::pin!(f);
    let _ = f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
}
