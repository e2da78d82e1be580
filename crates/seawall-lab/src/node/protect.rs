//! Server protection for the seawall configuration: the `seawall-tower` server layers.
//!
//! `DeadlineLayer` (outermost) reads the caller's time left and drops the request when it runs
//! out; `ShedLayer` admits at most `max_in_flight` at once, queues a few, sheds retries first
//! and rejects the rest at once with a 503. The baseline gets neither.

use std::num::NonZeroUsize;

use axum::Router;
use seawall_tower::server::{DeadlineLayer, RejectReason, ServerMetrics, ShedLayer};

use super::stats::StatsSnapshot;

/// Wraps every route of `router` in the server layers, reporting into `metrics`.
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    max_in_flight: usize,
    metrics: &ServerMetrics,
) -> Router<S> {
    let cap = NonZeroUsize::new(max_in_flight.max(1)).expect("at least 1");
    router
        .route_layer(ShedLayer::new(cap).metrics(metrics.clone()))
        .route_layer(DeadlineLayer::new().metrics(metrics.clone()))
}

/// Adds what the server layers counted to a node's snapshot: deadline drops as doomed, every
/// other rejection as shed, and the layer's queue age if older than the node's own.
pub fn merge(mut s: StatsSnapshot, metrics: &ServerMetrics) -> StatsSnapshot {
    let m = metrics.snapshot();
    let expired = m.rejected(RejectReason::DeadlineExpired);
    s.doomed += expired;
    s.shed += m.rejected_total() - expired;
    s.queue_age_s = s.queue_age_s.max(m.oldest_queued.as_secs_f64());
    s.queue_len += m.queue_len;
    s
}
