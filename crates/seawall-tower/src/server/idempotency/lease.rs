//! [`Lease`]: a request's claim on its key, settled exactly once however the request ends.
//!
//! A request future can be dropped at any await: by an outer `DeadlineLayer`, by hyper when the
//! client disconnects, by a `tokio::time::timeout`. The guard is made *before* the store is asked
//! to begin the key, carries the request's [`Owner`] token, and when dropped unsettled settles
//! the key for that owner only:
//!
//! - **cut while `begin` runs**: `begin` runs in its own task, so it is never cut half-way; the
//!   guard waits for it and, if it recorded the key, releases it (nothing ran);
//! - handler **not called** yet, or called but still **waiting in an admission queue** (a
//!   [`ShedLayer`](crate::server::ShedLayer) below marks the request's
//!   [`Dispatch`]): the key is released, so a retry executes;
//! - handler **called**: the key becomes *outcome unknown* at once
//!   ([`IdempotencyStore::abandon`]); it is never executed again within the TTL, because the
//!   handler may have had effects before it was cancelled.
//!
//! Because every settle call names the owner, a late release can never delete the marker of an
//! identical request that began the key in the meantime.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::task::JoinHandle;

use super::error::StoreError;
use super::key::{Fingerprint, Owner, StoreKey};
use super::layer::Config;
use super::metrics::Event;
use super::store::{Begin, IdempotencyStore};
use crate::server::Dispatch;

type Began = JoinHandle<Result<Begin, StoreError>>;

/// A `begin` runs on for at most this many store timeouts after its request stopped waiting
/// (answered `503`, or was cut), so that the guard can release what it records. A `begin` still
/// unanswered then is dropped: if the store records it later anyway, that key answers
/// outcome-unknown after its lease (the safe side), as any crash would leave it.
const BEGIN_BOUND: u32 = 2;

type Unsent = Pin<Box<dyn Future<Output = Result<Begin, StoreError>> + Send>>;

enum Phase {
    /// `begin` is ready to be sent (not polled yet: nothing reached the store).
    Unsent(Unsent),
    /// `begin` was sent; its task's handle until its answer is read (`None`: it failed, and may
    /// or may not have recorded the key).
    Beginning(Option<Began>),
    /// The store said execute; the handler has not been called.
    Began,
    /// The handler was called (it may still wait in an admission queue: see the dispatch mark).
    Called,
    /// The flow recorded the outcome itself, or the key was never ours.
    Settled,
}

pub(super) struct Lease {
    store: Arc<dyn IdempotencyStore>,
    cfg: Arc<Config>,
    key: StoreKey,
    owner: Owner,
    dispatch: Dispatch,
    phase: Phase,
}

impl Lease {
    /// Prepares the store's `begin` of `key` for a fresh owner (sent by [`answer`](Self::answer);
    /// must run inside a Tokio runtime, as the whole layer does).
    pub(super) fn begin(
        store: Arc<dyn IdempotencyStore>,
        cfg: Arc<Config>,
        key: StoreKey,
        fp: Fingerprint,
    ) -> Self {
        let owner = Owner::random();
        let unsent: Unsent = {
            let (store, key, cfg) = (store.clone(), key.clone(), cfg.clone());
            Box::pin(async move {
                let begin = store.begin(&key, &fp, &owner, cfg.lease, cfg.ttl);
                // Bounded too, so a black-holed store cannot pile up tasks (see `BEGIN_BOUND`).
                let bound = cfg.store_timeout.saturating_mul(BEGIN_BOUND);
                tokio::time::timeout(bound, begin).await.unwrap_or(Err(StoreError::Timeout))
            })
        };
        let phase = Phase::Unsent(unsent);
        Lease { store, cfg, key, owner, dispatch: Dispatch::new(), phase }
    }

    /// Sends `begin` and returns the store's answer, within the store timeout. A store that
    /// answers at once (the memory store) answers on the first poll, here; one that does not
    /// finishes in a task of its own. On a timeout or an error the key may still have been
    /// recorded for this owner: the guard releases it when dropped (after `begin` finished), so
    /// a retry can execute.
    pub(super) async fn answer(&mut self) -> Result<Begin, StoreError> {
        let mut unsent = match std::mem::replace(&mut self.phase, Phase::Settled) {
            Phase::Unsent(f) => f,
            other => {
                self.phase = other;
                return Err(StoreError::Corrupt); // asked twice: unreachable from the flow
            }
        };
        // One poll in place; no await point lies between it and recording what it did.
        let first = std::future::poll_fn(|cx| Poll::Ready(unsent.as_mut().poll(cx))).await;
        let answer = match first {
            Poll::Ready(answer) => answer,
            Poll::Pending => {
                // Sent, not answered: it runs on where no cancellation can cut it half-way.
                // The guard holds the task *before* the wait, so a cut during it releases.
                self.phase = Phase::Beginning(Some(tokio::spawn(unsent)));
                let Phase::Beginning(Some(task)) = &mut self.phase else {
                    unreachable!("set on the line above")
                };
                match tokio::time::timeout(self.cfg.store_timeout, task).await {
                    Err(_) => {
                        self.cfg.metrics.count(Event::StoreTimeout);
                        return Err(StoreError::Timeout); // the drop waits for the task
                    }
                    Ok(joined) => joined.unwrap_or_else(|e| Err(StoreError::Backend(Box::new(e)))),
                }
            }
        };
        self.phase = match &answer {
            Ok(Begin::Execute) => Phase::Began,
            Ok(_) => Phase::Settled,
            Err(_) => Phase::Beginning(None),
        };
        answer
    }

    pub(super) fn key(&self) -> (&StoreKey, &Owner) {
        (&self.key, &self.owner)
    }

    /// The handler is about to be called: from now on a cancellation means "outcome unknown",
    /// unless an admission layer marks the returned [`Dispatch`] as still queued.
    pub(super) fn call(&mut self) -> Dispatch {
        self.phase = Phase::Called;
        self.dispatch.clone()
    }

    /// The request reached an outcome the flow records itself: nothing to do on drop.
    pub(super) fn disarm(&mut self) {
        self.phase = Phase::Settled;
    }

    /// Gives the key back without counting a cancellation (the flow refused the request itself).
    pub(super) fn give_back(mut self) {
        self.settle(false);
    }

    fn settle(&mut self, cancelled: bool) {
        let to_do = match std::mem::replace(&mut self.phase, Phase::Settled) {
            Phase::Settled | Phase::Unsent(_) => return,
            Phase::Called if !self.dispatch.waiting() => Settle::Abandon,
            Phase::Beginning(task) => Settle::Release(task),
            Phase::Began | Phase::Called => Settle::Release(None),
        };
        let (store, cfg, key, owner) =
            (self.store.clone(), self.cfg.clone(), self.key.clone(), self.owner);
        if cancelled {
            let released = matches!(to_do, Settle::Release(_));
            cfg.metrics.count(if released { Event::ReleasedCancelled } else { Event::Abandoned });
        }
        let in_runtime = tokio::runtime::Handle::try_current().ok();
        let settle = async move {
            let call = match to_do {
                Settle::Release(Some(task)) => {
                    // `begin` is never cut half-way: wait for it, release only what it recorded.
                    if !matches!(task.await, Ok(Ok(Begin::Execute))) {
                        return;
                    }
                    store.release(&key, &owner)
                }
                Settle::Release(None) => store.release(&key, &owner),
                Settle::Abandon => store.abandon(&key, &owner),
            };
            // Bounded like every store call; a failure leaves the marker to its lease (safe).
            if tokio::runtime::Handle::try_current().is_ok() {
                drop(tokio::time::timeout(cfg.store_timeout, call).await);
            } else {
                drop(call.await);
            }
        };
        match in_runtime {
            Some(rt) => drop(rt.spawn(settle)),
            None => poll_once(settle),
        }
    }
}

enum Settle {
    /// Release the key (after `begin` finished, if its task is given).
    Release(Option<Began>),
    /// Record outcome unknown.
    Abandon,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.settle(true);
    }
}

/// Outside a runtime (a runtime shutting down drops its tasks): one poll, which settles the
/// in-memory store; other stores keep the marker until its lease runs out (safe).
fn poll_once(f: impl Future<Output = ()>) {
    let f = std::pin::pin!(f);
    let _ = f.poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
}
