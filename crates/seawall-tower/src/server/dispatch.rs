//! [`Dispatch`]: whether a request an outer layer passed on has reached the handler yet.
//!
//! An outer layer that must settle something when a request is cut — the
//! [`IdempotencyLayer`](crate::server::IdempotencyLayer) releases a key whose handler never ran,
//! and records "outcome unknown" for one whose handler may have had effects — cannot see, from
//! outside, whether an admission layer below it is still holding the request in its queue. So it
//! puts a `Dispatch` into the request extensions, and a layer that queues
//! ([`ShedLayer`](crate::server::ShedLayer)) marks it [`queued`](Dispatch::queued) while the
//! request waits and [`admitted`](Dispatch::admitted) when it calls its inner service. Without
//! an admission layer that marks it, a request passed on counts as having reached the handler
//! (the safe side: never executed twice).
//!
//! An admission layer of your own that holds requests before calling its inner service can mark
//! it the same way:
//!
//! ```
//! use seawall_tower::server::Dispatch;
//!
//! let mut req = http::Request::new(());
//! req.extensions_mut().insert(Dispatch::new());
//! // … in your layer's `call`, when the request has to wait:
//! if let Some(d) = req.extensions().get::<Dispatch>() {
//!     d.queued();
//! }
//! // … and right before calling the inner service:
//! if let Some(d) = req.extensions().get::<Dispatch>() {
//!     d.admitted();
//! }
//! # assert!(!req.extensions().get::<Dispatch>().unwrap().waiting());
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

const PASSED_ON: u8 = 0;
const QUEUED: u8 = 1;
const ADMITTED: u8 = 2;

/// A shared mark: passed on, queued by an admission layer, or admitted to the handler.
#[derive(Clone, Default)]
pub struct Dispatch(Arc<AtomicU8>);

impl Dispatch {
    /// A mark in the "passed on" state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The request waits in an admission queue: its handler has not been called.
    pub fn queued(&self) {
        // Never back from admitted: a request that reached the handler stays there.
        let _ = self.0.compare_exchange(PASSED_ON, QUEUED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The request leaves the queue for the handler.
    pub fn admitted(&self) {
        self.0.store(ADMITTED, Ordering::Release);
    }

    /// Whether an admission layer holds the request in its queue now (its handler surely has not
    /// been called).
    pub fn waiting(&self) -> bool {
        self.0.load(Ordering::Acquire) == QUEUED
    }
}

impl fmt::Debug for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.0.load(Ordering::Acquire) {
            QUEUED => "queued",
            ADMITTED => "admitted",
            _ => "passed on",
        };
        f.debug_tuple("Dispatch").field(&state).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_waiting_only_between_queued_and_admitted() {
        let d = Dispatch::new();
        assert!(!d.waiting(), "passed on counts as reached");
        d.queued();
        assert!(d.clone().waiting(), "clones share the mark");
        d.admitted();
        assert!(!d.waiting());
        d.queued();
        assert!(!d.waiting(), "never back to the queue once admitted");
    }
}
